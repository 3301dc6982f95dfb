"""Preference pairs for both reflection roles from episodes that share a context: several feedbacks written
on the same answer, several refinements written after the same feedback (``lmgym.traindata.reflection_branching``
plays such episodes by branching the episode engine; independent samples that happen to share a context work
as well).

- Actor: under one refinement prompt (question, answer, critic request, feedback, refine request: the text
  the actor saw), a refinement graded correct is chosen over one graded wrong.
- Critic: under one critic prompt (question, answer, critic request), feedback is scored by the fraction of
  the refinements written after it that were graded correct; feedback with a higher score is chosen over
  feedback with a lower one. With one refinement per feedback: feedback after which the refinement became
  correct against feedback after which it did not.

Every refinement round of every episode is a record (round k: answer k, feedback k, answer k + 1), graded as
the env graded it. A context whose candidates are all right or all wrong gives no pair (a tie, counted).
Degenerate pairs are dropped and counted by reason (first reason that applies):

- ``empty``: the chosen or the rejected text is blank;
- ``identical``: chosen and rejected are the same text up to whitespace;
- ``unparseable`` (with ``drop_unparsed``): the rejected side's answer has no parsed final answer (the actor's
  rejected refinement; for the critic, every refinement after the rejected feedback): such a pair teaches the
  answer format, which SFT teaches, rather than reasoning or useful feedback.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lmgym.buffers import Trajectory
from lmgym.envs.reflection import ACTOR, CRITIC, ReflectionEnv, reflection_transcript
from lmgym.traindata.preference_data import PreferencePair
from lmgym.traindata.reflection_pairs import Round, episode_rounds

ROLES = (ACTOR, CRITIC)
DROP_REASONS = ("empty", "identical", "unparseable")


@dataclass
class ContextPairs:
    """Pairs per role, and per role: contexts that were ties (all candidates right or all wrong), and the
    pairs dropped as degenerate, by reason (``DROP_REASONS``)."""

    actor: list[PreferencePair] = field(default_factory=list)
    critic: list[PreferencePair] = field(default_factory=list)
    ties: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    dropped: dict[str, dict[str, int]] = field(
        default_factory=lambda: {role: dict.fromkeys(DROP_REASONS, 0) for role in ROLES})

    def pairs(self) -> dict[str, list[PreferencePair]]:
        """{"actor": pairs, "critic": pairs}, as ``pairs_from_episodes`` returns them."""
        return {ACTOR: list(self.actor), CRITIC: list(self.critic)}

    def counts(self) -> dict[str, int]:
        """Flat counts for a summary: ``<role>_pairs``, ``<role>_ties`` and ``<role>_dropped_<reason>``."""
        out: dict[str, int] = {}
        for role in ROLES:
            out[f"{role}_pairs"] = len(getattr(self, role))
            out[f"{role}_ties"] = self.ties[role]
            out.update({f"{role}_dropped_{reason}": n for reason, n in self.dropped[role].items()})
        return out

    def samples(self, k: int = 3) -> dict[str, list[PreferencePair]]:
        """The first ``k`` pairs of each role, for display."""
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise ValueError(f"samples: k must be an int >= 0; got {k!r}")
        return {role: list(getattr(self, role)[:k]) for role in ROLES}


def context_pairs(episodes: Iterable[Trajectory | Mapping[str, Any]], env: ReflectionEnv, *,
                  drop_unparsed: bool = True, max_pairs_per_context: int | None = None) -> ContextPairs:
    """Actor and critic pairs from finished (or branched, unfinished) episodes of ``env``, grouped by the
    context each role saw (see the module docstring). ``max_pairs_per_context`` keeps at most that many pairs
    per context (None: every right x wrong combination), in the records' order."""
    base = getattr(env, "unwrapped", env)
    if not isinstance(base, ReflectionEnv):
        raise ValueError(f"context_pairs needs the ReflectionEnv that played the episodes; got {type(env).__name__}")
    if max_pairs_per_context is not None and (not isinstance(max_pairs_per_context, int)
                                              or isinstance(max_pairs_per_context, bool) or max_pairs_per_context < 1):
        raise ValueError(f"max_pairs_per_context must be None or an int >= 1; got {max_pairs_per_context!r}")
    requests = (base.critic_request, base.refine_request)
    actor_groups: dict[str, dict[str, Round]] = {}  # refinement prompt -> refinement text -> its round
    critic_groups: dict[str, dict[str, list[Round]]] = {}  # critic prompt -> feedback -> rounds after it
    for number, episode in enumerate(episodes):
        for r in episode_rounds(number, episode, *requests):
            critic_prompt = reflection_transcript(r.before, [r.initial], *requests)
            actor_prompt = reflection_transcript(r.before, [r.initial, r.feedback], *requests)
            actor_groups.setdefault(actor_prompt, {}).setdefault(r.refined, r)
            critic_groups.setdefault(critic_prompt, {}).setdefault(r.feedback, []).append(r)
    out = ContextPairs()
    for prompt, refinements in actor_groups.items():
        scored = [(text, float(r.refined_correct), r.refined_answer is not None) for text, r in refinements.items()]
        _add(out, ACTOR, prompt, scored, drop_unparsed, max_pairs_per_context)
    for prompt, feedbacks in critic_groups.items():
        scored = [(text, sum(r.refined_correct for r in rounds) / len(rounds),
                   any(r.refined_answer is not None for r in rounds)) for text, rounds in feedbacks.items()]
        _add(out, CRITIC, prompt, scored, drop_unparsed, max_pairs_per_context)
    return out


def _add(out: ContextPairs, role: str, prompt: str, scored: list[tuple[str, float, bool]], drop_unparsed: bool,
         cap: int | None) -> None:
    """Pairs of one context: each candidate (text, score, parsed) over every lower-scored one."""
    if len(scored) > 1 and len({score for _, score, _ in scored}) == 1:
        out.ties[role] += 1
        return
    kept = getattr(out, role)
    made = 0
    for chosen, high, _ in scored:
        for rejected, low, parsed in scored:
            if high <= low or (cap is not None and made >= cap):
                continue
            reason = _degenerate(chosen, rejected, parsed, drop_unparsed)
            if reason is not None:
                out.dropped[role][reason] += 1
                continue
            kept.append(PreferencePair(prompt, chosen, rejected))
            made += 1


def _degenerate(chosen: str, rejected: str, rejected_parsed: bool, drop_unparsed: bool) -> str | None:
    if not chosen.strip() or not rejected.strip():
        return "empty"
    if chosen.split() == rejected.split():
        return "identical"
    if drop_unparsed and not rejected_parsed:
        return "unparseable"
    return None
