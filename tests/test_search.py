"""Search methods on a scripted policy and a scripted step scorer: each picks the answer its rule says,
samples in one batched call per step, and counts exactly the tokens it sampled."""
import pytest
import torch

from lmgym.envs import make
from lmgym.search import SearchSettings, run_search
from lmgym.search.mcts import MCTSConfig
from lmgym.training.config import ConfigError
from tests.search_toys import ScriptedPolicy, ScriptedScorer

STARTS = [{"options": {"index": 0}}, {"options": {"index": 1}}]


def stepwise_env(max_steps=3):
    return make("Arithmetic-v0", level=1, split="test", mode="stepwise", max_steps=max_steps)


def test_greedy_takes_the_first_candidate_of_every_step_in_one_call_per_step():
    env = stepwise_env()
    gold = env.get_problem(0).gold
    policy = ScriptedPolicy({"": ["a = 1\n", "#### 9\n"], "a = 1\n": [f"#### {gold}\n", "#### 8\n"]})
    results = run_search(policy, env, STARTS, SearchSettings(method="greedy"))
    assert [r.answer for r in results] == [gold, gold]
    assert results[0].correct and results[1].correct == (env.get_problem(1).gold == gold)
    assert policy.calls == [2, 2]  # both problems, one call per step
    assert [r.tokens for r in results] == [len("a = 1\n") + len(f"#### {gold}\n")] * 2
    assert results[0].trajectory.text == f"a = 1\n#### {gold}\n"


def test_majority_votes_and_best_of_n_picks_the_scorers_favourite_against_the_vote():
    script = {"": ["#### 5\n", "#### 7\n", "#### 5\n"]}
    scorer = ScriptedScorer({"#### 7\n": 0.9, "#### 5\n": 0.2})
    maj_policy, best_policy = ScriptedPolicy(script), ScriptedPolicy(script)
    maj = run_search(maj_policy, stepwise_env(), STARTS, SearchSettings(method="maj", n=3))
    best = run_search(best_policy, stepwise_env(), STARTS, SearchSettings(method="best_of_n", n=3), scorer)
    assert [r.answer for r in maj] == ["5", "5"] and maj[0].details["votes"] == {"5": 2, "7": 1}
    assert [r.answer for r in best] == ["7", "7"] and best[0].details["chosen"] == 1
    assert best[0].details["scores"] == [0.2, 0.9, 0.2]
    assert maj_policy.calls == best_policy.calls == [6]  # 2 problems x 3 samples, one call
    assert scorer.calls == [6]  # every sample scored in one call
    for results, policy in ((maj, maj_policy), (best, best_policy)):
        assert [r.tokens for r in results] == [3 * len("#### 5\n")] * 2
        assert sum(r.tokens for r in results) == policy.sampled


def test_best_of_n_prefers_an_answered_solution_over_a_higher_scored_unfinished_one():
    policy = ScriptedPolicy({"": ["x\n", "#### 4\n"], "x\n": ["x\n"], "x\nx\n": ["x\n"]})
    scorer = ScriptedScorer({"x\n": 1.0, "#### 4\n": 0.1})
    results = run_search(policy, stepwise_env(), STARTS[:1], SearchSettings(method="best_of_n", n=2), scorer)
    assert results[0].answer == "4" and results[0].details["scores"] == [1.0, 0.1]
    assert results[0].tokens == 3 * len("x\n") + len("#### 4\n") == policy.sampled


@pytest.mark.parametrize("aggregation, answer", [("last", "2"), ("min", "1")])
def test_beam_ranks_by_the_aggregate_retires_finished_solutions_and_expands_all_beams_in_one_call(
        aggregation, answer):
    # step 1: "#### 1" (0.8) finishes at once, "b = 2" (0.7) goes on to "#### 2" (0.9)
    policy = ScriptedPolicy({"": ["#### 1\n", "b = 2\n", "b = 2\n", "b = 2\n"], "b = 2\n": ["#### 2\n"]})
    scorer = ScriptedScorer({"#### 1\n": 0.8, "b = 2\n": 0.7, "#### 2\n": 0.9})
    settings = SearchSettings(method="beam", beam_width=2, beam_expand=2, aggregation=aggregation)
    results = run_search(policy, stepwise_env(), STARTS, settings, scorer)
    # step 1: 2 beams x 2 candidates for each of 2 problems; the top 2 are "#### 1" (retired) and a "b"
    # step 2: the one beam left per problem x 2 candidates; one more solution needed, so one kept
    assert policy.calls == [8, 4] and scorer.calls == [8, 4]
    assert [r.answer for r in results] == [answer, answer]
    assert results[0].details["finished"] == 2 and results[0].details["steps"] == 2
    assert results[0].details["score"] == pytest.approx(0.9 if aggregation == "last" else 0.8)
    step1 = len("#### 1\n") + 3 * len("b = 2\n")
    assert [r.tokens for r in results] == [step1 + 2 * len("#### 2\n")] * 2
    assert sum(r.tokens for r in results) == policy.sampled


def test_beam_stops_a_problem_once_its_beams_have_all_finished():
    policy = ScriptedPolicy({"": ["#### 3\n"]})
    results = run_search(policy, stepwise_env(), STARTS, SearchSettings(method="beam", beam_width=2, beam_expand=3),
                         ScriptedScorer({}))
    assert policy.calls == [12] and [r.answer for r in results] == ["3", "3"]
    assert results[0].details["finished"] == 2 and results[0].tokens == 6 * len("#### 3\n")


def test_mcts_follows_the_scorers_best_path_at_the_settings_temperature_and_counts_every_token():
    policy = ScriptedPolicy({"": ["a = 1\n", "b = 2\n"], "a = 1\n": ["#### 1\n"], "b = 2\n": ["#### 2\n"]})
    scorer = ScriptedScorer({"a = 1\n": 0.2, "b = 2\n": 0.9, "#### 1\n": 0.1, "#### 2\n": 0.95})
    tree = MCTSConfig(simulations=6, expand_k=2, wave_size=1, temperature=1.0, max_new_tokens=64)
    settings = SearchSettings(method="mcts", temperature=0.5, max_new_tokens=16, mcts=tree)
    assert settings.label == "mcts_6"
    results = run_search(policy, stepwise_env(), STARTS, settings, scorer)
    assert [r.answer for r in results] == ["2", "2"]
    assert results[0].trajectory.text == "b = 2\n#### 2\n" and results[0].details["simulations"] == 6
    assert set(policy.settings) == {(16, 0.5)}  # the search settings' sampling, not the tree config's
    assert all(n == 2 * 2 for n in policy.calls)  # one sampling call per wave: one leaf x 2 candidates, 2 trees
    assert sum(r.tokens for r in results) == policy.sampled


def test_the_real_tiny_policy_runs_every_method_and_tokens_are_its_sampled_tokens(tiny_policy):
    env = stepwise_env(max_steps=2)
    scorer = ScriptedScorer({})
    for settings in (SearchSettings(method="greedy", max_new_tokens=5),
                     SearchSettings(method="maj", n=2, max_new_tokens=5),
                     SearchSettings(method="beam", beam_width=2, beam_expand=2, max_new_tokens=5),
                     SearchSettings(method="mcts", max_new_tokens=5, mcts=MCTSConfig(simulations=4, expand_k=2))):
        counted = []
        tiny_policy.on_tokens = counted.append  # the decoding loop reports every token it samples
        results = run_search(tiny_policy, env, STARTS, settings, scorer, torch.Generator().manual_seed(0))
        tiny_policy.on_tokens = None
        assert len(results) == 2 and all(r.trajectory is not None for r in results)
        assert sum(r.tokens for r in results) == sum(counted) > 0
        if settings.method == "greedy":
            assert [r.tokens for r in results] == [r.trajectory.num_generated_tokens for r in results]


def test_bad_settings_and_missing_or_broken_scorers_are_one_line_errors():
    methods = r"greedy \| maj \| weighted_maj \| best_of_n \| beam \| mcts"
    with pytest.raises(ConfigError, match=rf"^SearchSettings.method must be {methods}, got 'dfs'$"):
        SearchSettings(method="dfs")
    with pytest.raises(ConfigError, match=r"^SearchSettings.temperature must be > 0 for maj"):
        SearchSettings(method="maj", temperature=0)
    with pytest.raises(ConfigError, match=r"^SearchSettings.n expects an integer, got 'many'"):
        SearchSettings(n="many")
    with pytest.raises(ConfigError, match=r"^SearchSettings.aggregation must be min"):
        SearchSettings(aggregation="max")
    with pytest.raises(ConfigError, match=r"^SearchSettings.mcts.evaluation must be 'prm' at inference, got 'rollout'"):
        SearchSettings(method="mcts", mcts=MCTSConfig(evaluation="rollout"))
    with pytest.raises(ConfigError, match=r"^SearchSettings.mcts expects a mapping of MCTSConfig fields, got 4$"):
        SearchSettings(mcts=4)
    assert SearchSettings(mcts={"simulations": 4}).mcts == MCTSConfig(simulations=4)  # a mapping of its fields
    policy, env = ScriptedPolicy({}), stepwise_env()
    for method in ("best_of_n", "beam", "mcts"):
        with pytest.raises(ValueError, match=rf"^run_search: method '{method}' needs a step scorer"):
            run_search(policy, env, STARTS, SearchSettings(method=method))

    class Short(ScriptedScorer):
        def score_branches(self, branches):
            return [[] for _ in branches]

    with pytest.raises(ValueError, match=r"^step scorer returned 0 scores for branch 0 with 1 steps$"):
        run_search(policy, env, STARTS, SearchSettings(method="beam"), Short({}))
    assert run_search(policy, env, [], SearchSettings()) == []
