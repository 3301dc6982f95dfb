"""`evaluate_reranking`: one pool of samples per problem, chosen among by maj, weighted maj and best-of-n under each
scorer and under scorers combined; every row on the same samples and tokens, one sampling pass, each scorer called
once a batch, by hand on scripted samples and scorers."""
import json

import pytest

from lmgym.envs import make
from lmgym.evaluation.rerank_eval import evaluate_reranking, geometric_mean
from lmgym.search import SearchSettings
from tests.search_toys import ScriptedPolicy, ScriptedScorer

GOLD = "125"  # level 1's first test problem; the second's is 93, so every sample is wrong there
SAMPLES = [f"#### {GOLD}\n", "#### 7\n", "#### 7\n", "#### 9\n"]


class CountingScorer(ScriptedScorer):
    """A scripted scorer that says it generated 3 tokens a solution, as a generative verifier counts them."""

    def __init__(self, table):
        super().__init__(table)
        self.tokens_generated = 0

    def score_branches(self, branches):
        self.tokens_generated += 3 * len(branches)
        return super().score_branches(branches)


def env():
    return make("Arithmetic-v0", level=1, split="test", mode="stepwise", max_steps=3)


def scorers():
    verifier = ScriptedScorer({SAMPLES[0]: 0.9, SAMPLES[1]: 0.2, SAMPLES[3]: 0.6})
    critic = CountingScorer({SAMPLES[0]: 0.5, SAMPLES[1]: 0.9, SAMPLES[3]: 0.1})
    return {"default": verifier, "critic": critic}


def test_every_rule_and_scorer_chooses_among_the_same_samples_by_hand(tmp_path):
    policy, named = ScriptedPolicy({"": SAMPLES}), scorers()
    rows = evaluate_reranking(policy, env(), SearchSettings(method="maj", n=4), named,
                              aggregations={"critic": "last"}, combined={"both": ("default", "critic")},
                              episodes=2, batch_problems=1, records_path=tmp_path / "rerank.json")
    by = {r["method"]: r for r in rows}
    assert list(by) == ["maj@4", "weighted_maj@4", "best_of_4", "weighted_maj[critic]@4", "best_of_4[critic]",
                        "weighted_maj[both]@4", "best_of_4[both]"]
    # problem 0 (gold 125): maj picks 7 (two votes); the verifier's sums 125: 0.9, 7: 0.4, 9: 0.6 and its best
    # 125; the critic's sums 7: 1.8 and its best 7; both: sqrt(.45) = .67 for 125, sqrt(.18) = .42 for each 7,
    # so the votes go to 7 (.85) and the best to 125. Problem 1 (gold 93): nothing right.
    accuracy = {m: r["accuracy"] for m, r in by.items()}
    assert accuracy == {"maj@4": 0.0, "weighted_maj@4": 0.5, "best_of_4": 0.5, "weighted_maj[critic]@4": 0.0,
                        "best_of_4[critic]": 0.0, "weighted_maj[both]@4": 0.0, "best_of_4[both]": 0.5}
    # one sampling pass: 4 samples a problem, every row the same policy tokens
    assert policy.calls == [4, 4] and policy.sampled == 2 * sum(len(s) for s in SAMPLES)
    assert {r["tokens_per_problem"] for r in rows} == {sum(len(s) for s in SAMPLES)}
    assert named["default"].calls == [4, 4] and named["critic"].calls == [4, 4]  # once a batch, reused by "both"
    # the critic's tokens: 3 a solution, on its rows and the combined ones only
    assert [r.get("verifier_tokens_per_problem") for r in rows] == [None, None, None, 12.0, 12.0, 12.0, 12.0]
    assert "vs" not in by["maj@4"] and by["weighted_maj@4"]["vs"]["difference"] == pytest.approx(0.5)
    # the verifier's AUC on the pool: the one right sample (0.9) above 6 of the 7 wrong ones, tied with problem 1's
    # wrong 125 (0.9): 6.5 / 7
    assert by["weighted_maj@4"]["sample_auc"] == pytest.approx(6.5 / 7)
    records = [json.loads(line) for line in (tmp_path / "rerank.problems.jsonl").read_text().splitlines()]
    assert [r["gold"] for r in records] == [GOLD, "93"] and all(r["kind"] == "search" for r in records)
    pool = records[0]["samples"]
    assert pool["answers"] == [GOLD, "7", "7", "9"] and pool["correct"] == [True, False, False, False]
    assert pool["scores"]["both"] == pytest.approx([0.45 ** 0.5, 0.18 ** 0.5, 0.18 ** 0.5, 0.06 ** 0.5])


def test_the_geometric_mean_by_hand():
    assert geometric_mean([0.25, 1.0]) == pytest.approx(0.5)
    assert geometric_mean([0.0, 0.9]) == 0.0
    assert geometric_mean([0.3]) == pytest.approx(0.3)


@pytest.mark.parametrize("kwargs, message", [
    (dict(settings=SearchSettings(method="best_of_n", n=4)), "method 'maj' without max_tokens"),
    (dict(settings=SearchSettings(method="maj", n=4, max_tokens=50)), "method 'maj' without max_tokens"),
    (dict(scorers={}), "no scorers"),
    (dict(combined={"both": ("default",)}), "combined 'both' must be a new name over 2 or more"),
    (dict(combined={"critic": ("default", "critic")}), "combined 'critic' must be a new name"),
    (dict(combined={"both": ("default", "nope")}), "combined 'both'"),
    (dict(aggregations={"nope": "last"}), "aggregations name unknown scorers: nope"),
    (dict(aggregations={"critic": "median"}), "aggregation of 'critic' must be one of"),
    (dict(episodes=0), "episodes must be an integer >= 1"),
    (dict(offset=10_000), "offset 10000 is past the last problem"),
])
def test_bad_input_is_one_line(kwargs, message):
    args = dict(settings=SearchSettings(method="maj", n=4), scorers=scorers())
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        evaluate_reranking(ScriptedPolicy({"": SAMPLES}), env(), args.pop("settings"), args.pop("scorers"), **args)
