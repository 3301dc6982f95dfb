"""Weighted majority voting on a fixed table, and the hard per-problem token cap of every search method
(`SearchSettings.max_tokens`) on a scripted policy: tokens charged in sampling order, the crossing
sample cut at the cap. The tiny tokenizer is one token per character, so every count is len(text)."""
import pytest

from lmgym.envs import make
from lmgym.search import SearchSettings, run_search
from lmgym.search.token_budget import charge_in_order
from lmgym.search.votes import weighted_majority, weighted_votes
from lmgym.training.config import ConfigError
from tests.search_toys import ScriptedPolicy, ScriptedScorer

STARTS = [{"options": {"index": 0}}, {"options": {"index": 1}}]


def stepwise_env(max_steps=3):
    return make("Arithmetic-v0", level=1, split="test", mode="stepwise", max_steps=max_steps)


@pytest.mark.parametrize("answers, scores, votes, winner", [
    # plain maj would take "5" (2 votes each, "5" first); the scores give "7" 1.0 against 0.5
    (["5", "7", "5", None, "7"], [0.2, 0.9, 0.3, 1.0, 0.1], {"5": 0.5, "7": 1.0}, "7"),
    # exact tie (0.5 = 0.25 + 0.25): the answer seen first
    (["a", "b", "b"], [0.5, 0.25, 0.25], {"a": 0.5, "b": 0.5}, "a"),
    (["b", "a"], [0.5, 0.5], {"b": 0.5, "a": 0.5}, "b"),
    # three low scores outweigh one high one
    (["1", "2", "2", "2"], [0.9, 0.4, 0.4, 0.4], {"1": 0.9, "2": pytest.approx(1.2)}, "2"),
    # a zero-scored answer still beats no answer; unparsed answers never vote
    ([None, "3", None], [1.0, 0.0, 1.0], {"3": 0.0}, "3"),
    ([None, None], [0.7, 0.2], {}, None),
    ([], [], {}, None),
])
def test_weighted_majority_sums_probabilities_per_answer(answers, scores, votes, winner):
    assert weighted_votes(answers, scores) == votes
    assert weighted_majority(answers, scores) == winner


@pytest.mark.parametrize("scores, message", [
    ([-0.4, 0.5], r"scores must be probabilities in \[0, 1\], got -0.4"),  # a logit
    ([2.3, 0.5], r"scores must be probabilities in \[0, 1\], got 2.3"),
    ([float("nan"), 0.5], r"got nan"),
    ([0.5], r"^weighted_votes: 2 answers but 1 scores$"),
])
def test_weighted_majority_refuses_logits_and_mismatched_lengths(scores, message):
    with pytest.raises(ValueError, match=message):
        weighted_majority(["1", "2"], scores)


def test_weighted_maj_search_votes_with_the_scorers_sums():
    script = {"": ["#### 5\n", "#### 7\n", "#### 5\n"]}
    # "5" twice at 0.2 (0.4) against "7" once at 0.9: "7"; at 0.3 instead: "5" (0.4 > 0.3)
    for seven, winner in ((0.9, "7"), (0.3, "5")):
        scorer = ScriptedScorer({"#### 7\n": seven, "#### 5\n": 0.2})
        policy = ScriptedPolicy(script)
        results = run_search(policy, stepwise_env(), STARTS, SearchSettings(method="weighted_maj", n=3), scorer)
        assert [r.answer for r in results] == [winner, winner]
        assert results[0].details["votes"] == pytest.approx({"5": 0.4, "7": seven})
        assert results[0].details["chosen"] == (1 if winner == "7" else 0)
        assert scorer.calls == [6] and policy.calls == [6]
        assert [r.tokens for r in results] == [21, 21]


def test_weighted_maj_needs_a_scorer_and_greedy_takes_no_cap():
    with pytest.raises(ValueError, match="method 'weighted_maj' needs a step scorer"):
        run_search(ScriptedPolicy({}), stepwise_env(), STARTS, SearchSettings(method="weighted_maj"))
    with pytest.raises(ConfigError, match=r"^SearchSettings.max_tokens must be None for greedy"):
        SearchSettings(max_tokens=10)
    with pytest.raises(ConfigError, match=r"^SearchSettings.max_tokens must be an integer >= 1 or None, got 0$"):
        SearchSettings(method="maj", max_tokens=0)


@pytest.mark.parametrize("costs, spent, cap, expected", [
    ([7, 7, 7], 0, 20, (2, 20)),   # 7, 14, then 21 > 20: the third is cut, the total is the cap
    ([7, 7], 6, 20, (2, 20)),      # 13, 20: exactly the cap, both whole
    ([7, 0, 7], 13, 20, (1, 20)),  # 20, then nothing more fits, not even an empty sample
    ([7, 7], 0, None, (2, 14)),    # no cap
    ([30], 0, 20, (0, 20)),
])
def test_charge_in_order_cuts_the_crossing_sample(costs, spent, cap, expected):
    assert charge_in_order(costs, spent, cap) == expected


def test_capped_majority_samples_rounds_until_the_cap_and_votes_only_with_whole_episodes():
    policy = ScriptedPolicy({"": ["#### 5\n", "#### 7\n", "#### 7\n"]})  # 7 tokens each
    settings = SearchSettings(method="maj", n=2, max_tokens=20)
    results = run_search(policy, stepwise_env(), STARTS[:1], settings)
    # round 1: 7 + 7 = 14 (5 and 7); round 2: 7 more would be 21 > 20: cut at 20, it does not vote
    assert policy.calls == [2, 2] and policy.sampled == 28
    assert results[0].tokens == 20 and results[0].details["votes"] == {"5": 1, "7": 1}
    assert results[0].answer == "5"  # the tie goes to the first seen; the cut third "7" would have won


def test_a_cap_below_one_episode_leaves_the_problem_unanswered():
    policy = ScriptedPolicy({"": ["#### 5\n"]})
    for method in ("maj", "weighted_maj", "best_of_n"):
        results = run_search(policy, stepwise_env(), STARTS, SearchSettings(method=method, n=2, max_tokens=5),
                             ScriptedScorer({}))
        assert [(r.answer, r.correct, r.tokens, r.trajectory) for r in results] == [(None, False, 5, None)] * 2


def test_a_hard_mcts_cap_needs_prm_evaluation():
    from lmgym.search.mcts import MCTSConfig

    with pytest.raises(ConfigError, match=r"^MCTSConfig.token_cap must be soft with evaluation 'rollout'"):
        MCTSConfig(evaluation="rollout", max_tokens=10, token_cap="hard")
    capped = SearchSettings(method="mcts", max_tokens=50).mcts_config()
    assert (capped.max_tokens, capped.token_cap) == (50, "hard")
