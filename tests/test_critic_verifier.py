"""algorithms/prm/critic_verifier.py on a scripted critic whose verdict log-probs are known: the scores are the
approving words' share of the probability at the verdict (read right after the critic's own check), or the
share of approving votes; best-of-N and weighted majority pick by them as hand computation says."""
import math
from collections import defaultdict

import pytest
import torch

from lmgym.algorithms.prm.critic_verifier import CriticVerifier, CriticVerifierConfig, verdict_start
from lmgym.envs import make
from lmgym.policies import Generation, Policy, build_tiny_tokenizer
from lmgym.search import SearchSettings, run_search
from lmgym.training.config import ConfigError
from tests.search_toys import ScriptedPolicy

# the critic's scripted behaviour per answer: its greedy check, P(verdict word) there, its sampled turns
CRITIC = {
    "#### 7": dict(check="Check: 3 + 4 = 7. All right; keep it.",
                   words={"All": 0.6, "Every": 0.1, "Step": 0.2, "So": 0.1},
                   votes=["All right; keep it.", "Step 1 should give 3, not 4; redo from step 1.",
                          "Every step is right; keep this answer.", "All right; keep it."]),
    "#### 5": dict(check="Check: 3 + 4 = 7, not 5. Step 1 should give 7, not 5; redo from step 1.",
                   words={"All": 0.3, "Every": 0.1, "Step": 0.5, "So": 0.1},
                   votes=["So step 1 is wrong: 7, not 5. Redo from step 1.", "All right; keep it."]),
}


class ScriptedCritic(Policy):
    """Reads which answer it judges from its context; writes the scripted check (greedy) or votes (sampled);
    `token_logprobs` gives each verdict word's scripted log-prob on its first token (0 on the rest)."""

    def __init__(self, words=None):
        self.tokenizer = build_tiny_tokenizer()
        self.words = words
        self.contexts: list[str] = []  # the text before each word read
        self.handed_out = defaultdict(int)

    def format_prompt(self, observation):
        return self.encode_text(observation)

    def _answer(self, text):
        found = [a for a in CRITIC if a in text]
        assert len(found) == 1, text
        return found[0]

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        out = []
        for prompt in prompts:
            script = CRITIC[self._answer(self.tokenizer.decode(prompt))]
            row = []
            for _ in range(n):
                if temperature == 0:
                    text = script["check"]
                else:
                    key = self._answer(self.tokenizer.decode(prompt))
                    text = script["votes"][self.handed_out[key] % len(script["votes"])]
                    self.handed_out[key] += 1
                ids = self.encode_text(text)[:max_new_tokens]
                row.append(Generation(list(prompt), ids, [0.0] * len(ids), self.tokenizer.decode(ids), "eos"))
            out.append(row)
        return out

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0):
        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            context = self.tokenizer.decode([t for t, m in zip(ids[:completion_start], mask) if m])
            word = self.tokenizer.decode([t for t, m in zip(ids[completion_start:], mask[completion_start:]) if m])
            self.contexts.append(context)
            table = (self.words or CRITIC[self._answer(context)]["words"])
            width = len(ids) - completion_start
            rows.append([math.log(table[word.strip()])] + [0.0] * (width - 1))
        return torch.tensor(rows), torch.zeros(len(rows), len(rows[0]))


def critic_env():
    return make("Reflection-Arithmetic-v0", level=1, split="test")


def stepwise_env():
    return make("Arithmetic-v0", level=1, split="test", mode="stepwise", max_steps=3)


def test_the_verdict_starts_after_the_check():
    words = ("All", "Every", "Step", "So")
    assert verdict_start("Check: 3 + 4 = 7. All right; keep it.", words) == len("Check: 3 + 4 = 7. ")
    assert verdict_start("Step 2 should give 4", words) == 0
    assert verdict_start("Check: 2.5 * 2 = 5; Step 1: 3 = 3. So step 2 is wrong", words) == \
        len("Check: 2.5 * 2 = 5; Step 1: 3 = 3. ")
    assert verdict_start("Check: 1 + 1 = 2", words) == len("Check: 1 + 1 = 2")


def test_verdict_scores_are_the_approving_share_read_after_the_critics_own_check():
    critic = ScriptedCritic()
    verifier = CriticVerifier(critic, critic_env())
    prompt = critic_env().build_prompt(critic_env().get_problem(0))
    scores = verifier.score([prompt, prompt], ["#### 7", "#### 5"])
    assert scores == pytest.approx([(0.6 + 0.1) / 1.0, (0.3 + 0.1) / 1.0])
    # each word read right after the check, cut before its verdict (the space goes with the word)
    assert {c[-len("Check: 3 + 4 = 7."):] for c in critic.contexts[:4]} == {"Check: 3 + 4 = 7."}
    assert all(c.endswith("Check: 3 + 4 = 7, not 5.") for c in critic.contexts[4:])
    assert all(prompt in c and critic_env().critic_request in c for c in critic.contexts)
    # probabilities that do not sum to 1 are normalised over the verdict words
    odd = CriticVerifier(ScriptedCritic({"All": 0.02, "Every": 0.02, "Step": 0.01, "So": 0.03}), critic_env())
    assert odd.score([prompt], ["#### 7"]) == pytest.approx([0.04 / 0.08])


def test_vote_scores_are_the_share_of_approving_turns():
    verifier = CriticVerifier(ScriptedCritic(), critic_env(), CriticVerifierConfig(mode="votes", votes=4))
    prompt = critic_env().build_prompt(critic_env().get_problem(0))
    assert verifier.score([prompt, prompt], ["#### 7", "#### 5"]) == pytest.approx([3 / 4, 2 / 4])


def test_best_of_n_and_weighted_majority_pick_by_the_critics_scores():
    """Samples 5, 7, 5 with critic scores 0.4, 0.7, 0.4: best-of-3 takes 7 (0.7 > 0.4), the weighted vote
    takes 5 (0.4 + 0.4 = 0.8 > 0.7), the plain vote 5."""
    script = {"": ["#### 5\n", "#### 7\n", "#### 5\n"]}
    critic = CriticVerifier(ScriptedCritic(), critic_env())
    scorers = {"critic": critic}
    starts = [{"options": {"index": 0}}]
    best_settings = SearchSettings(method="best_of_n", n=3, verifier="critic", aggregation="last")
    weighted_settings = SearchSettings(method="weighted_maj", n=3, verifier="critic", aggregation="last")
    [best] = run_search(ScriptedPolicy(script), stepwise_env(), starts, best_settings, scorers)
    [weighted] = run_search(ScriptedPolicy(script), stepwise_env(), starts, weighted_settings, scorers)
    assert best.answer == "7" and best.details["scores"] == pytest.approx([0.4, 0.7, 0.4])
    assert weighted.answer == "5" and weighted.details["votes"] == pytest.approx({"5": 0.8, "7": 0.7})
    assert best_settings.label == "best_of_3[critic]" and weighted_settings.label == "weighted_maj[critic]@3"
    capped = SearchSettings(method="best_of_n", n=3, verifier="critic", max_tokens=64)
    assert capped.label == "best_of_n[critic]@64tok"


def test_named_scorers_and_bad_settings_are_one_line():
    starts = [{"options": {"index": 0}}]
    policy = ScriptedPolicy({"": ["#### 5\n"]})
    with pytest.raises(ValueError, match="needs the scorer 'critic'; given: default"):
        run_search(policy, stepwise_env(), starts, SearchSettings(method="best_of_n", n=1, verifier="critic"),
                   {"default": CriticVerifier(ScriptedCritic(), critic_env())})
    with pytest.raises(ConfigError, match="verifier"):
        SearchSettings(method="best_of_n", verifier="no such")
    with pytest.raises(ConfigError, match="mode"):
        CriticVerifierConfig(mode="logits")
    with pytest.raises(ConfigError, match="reject_words"):
        CriticVerifierConfig(approve_words=("All",), reject_words=("All",))
    with pytest.raises(ValueError, match="ReflectionEnv"):
        CriticVerifier(ScriptedCritic(), stepwise_env())
