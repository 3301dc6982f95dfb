"""`SearchSettings`: one search method at inference and its budget (the config `run_search` takes), and
the episode engine a method samples with."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from lmgym.core.checked_config import CheckedConfig, ConfigError, setting
from lmgym.episodes.engine import EpisodeEngine, SamplingSettings
from lmgym.policies.base import Policy
from lmgym.policies.prm import AGGREGATIONS
from lmgym.search.mcts import MCTSConfig
from lmgym.search.methods import search_method, search_methods


@dataclass
class SearchSettings(CheckedConfig):
    """One search method and its budget. A bad value is a one-line ConfigError naming the field. `mcts` samples
    at these settings' temperature and max_new_tokens (`passed_down`; `mcts_config()` is what it runs)."""

    passed_down = {"mcts": ("temperature", "max_new_tokens")}

    method: str = setting("greedy", f"a search method registered in lmgym.search.methods: "
                                    f"{' | '.join(search_methods())}")
    n: int = setting(8, "episodes sampled per problem (maj, weighted_maj, best_of_n; with max_tokens: per round)")
    beam_width: int = setting(4, "beams kept per problem, and solutions the beam search finishes (beam)")
    beam_expand: int = setting(2, "candidate next steps sampled per beam per step (beam)")
    temperature: float = setting(0.8, "sampling temperature of maj, best_of_n, beam and mcts (> 0); greedy uses 0")
    max_new_tokens: int = setting(64, "tokens per action (one step in a stepwise env)")
    aggregation: str = setting("min", "solution score from step scores: min | last | product | mean "
                                      "(best_of_n's choice, weighted_maj's votes and beam's ranking)")
    max_tokens: int | None = setting(None, "hard cap on sampled tokens per problem (None: none). maj, weighted_maj "
                                           "and best_of_n sample rounds of n episodes until it; beam and mcts stop "
                                           "at it. Tokens are charged in sampling order; the sample that crosses "
                                           "the cap is cut there (its tokens up to the cap count; it neither votes "
                                           "nor finishes), and nothing after it counts or is used")
    mcts: MCTSConfig = setting(MCTSConfig(), "the tree search's settings (mcts); it samples at this temperature "
                                             "and max_new_tokens")
    verifier: str | None = setting(None, "the scorer's name when run_search is given a dict of scorers (e.g. "
                                         "{'default': prm, 'critic': critic}); None: the one scorer, or the dict's "
                                         "'default'. A name joins the label: best_of_8[critic]")

    def __post_init__(self) -> None:
        super().__post_init__()
        methods = search_methods()
        self.require("method", self.method in methods, " | ".join(methods))
        for name in ("n", "beam_width", "beam_expand", "max_new_tokens"):
            self.require(name, getattr(self, name) >= 1, "an integer >= 1")
        self.require("max_tokens", self.max_tokens is None or self.max_tokens >= 1, "an integer >= 1 or None")
        self.require("max_tokens", self.max_tokens is None or self.method != "greedy",
                     "None for greedy (one episode; a cap would only cut it)")
        self.require("temperature", self.temperature >= 0, ">= 0")
        self.require("temperature", self.method == "greedy" or self.temperature > 0,
                     f"> 0 for {self.method} (its candidates would all be the greedy one)")
        self.require("aggregation", self.aggregation in AGGREGATIONS, " | ".join(AGGREGATIONS))
        self.require("verifier", self.verifier is None or (isinstance(self.verifier, str)
                                                          and self.verifier.isidentifier()),
                     "None or a scorer's name (an identifier)")
        if self.method == "mcts" and self.mcts.evaluation != "prm":
            raise ConfigError.of_field(type(self).__name__, "mcts.evaluation",
                                       f"must be 'prm' at inference, got {self.mcts.evaluation!r} (a rollout's "
                                       f"value is the env's reward: training only)")

    @property
    def label(self) -> str:
        """A short name with the budget: greedy, maj@8, weighted_maj@8, best_of_8, beam_4x2, mcts_32; with
        max_tokens, the cap instead of the sample count (maj@300tok, best_of_n@300tok, beam_4x2@300tok, ...)."""
        return search_method(self.method).label_of(self)

    def mcts_config(self) -> MCTSConfig:
        """`mcts` sampling at these settings' temperature and max_new_tokens; with max_tokens, capped hard there."""
        capped = {} if self.max_tokens is None else {"max_tokens": self.max_tokens, "token_cap": "hard"}
        return dataclasses.replace(self.mcts, temperature=self.temperature, max_new_tokens=self.max_new_tokens,
                                   **capped)


def engine_for(policy: Policy, env, settings: SearchSettings, temperature: float | None = None) -> EpisodeEngine:
    """An engine sampling `settings.max_new_tokens` per action at `temperature` (default: the settings')."""
    chosen = settings.temperature if temperature is None else temperature
    return EpisodeEngine(env, policy, SamplingSettings(settings.max_new_tokens, chosen, 1.0))
