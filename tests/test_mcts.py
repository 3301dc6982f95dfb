"""MCTS over reasoning steps: a scripted policy and scorer with a known best path, one sampling call per
wave for every tree, token counts, budgets, answers, and a run on the tiny model."""
import math
import zlib

import pytest

from lmgym.envs import make
from lmgym.search.mcts import MCTS, MCTSConfig
from lmgym.search.mcts_tree import walk
from lmgym.search.search_play import checked_scores
from lmgym.training.config import ConfigError
from tests.mcts_toys import SCORES, ScriptedPolicy, SevenEnv, TableScorer

STARTS = [{"options": {"index": i}} for i in range(3)]
STEP, FINAL = 6, 7  # tokens of "x = 1\n" and of "#### 5\n" (the tiny tokenizer is character-level)


def search(config, starts=STARTS, **policy_kwargs):
    policy, scorer = ScriptedPolicy(**policy_kwargs), TableScorer()
    mcts = MCTS(policy, SevenEnv(), scorer, config)
    return mcts.search(starts, sample_key=1), policy, scorer, mcts


@pytest.mark.parametrize("selection", ["puct", "ucb1"])
@pytest.mark.parametrize("answer", ["visits", "value", "vote"])
def test_the_search_finds_the_best_path_that_a_greedy_first_step_misses(selection, answer):
    config = MCTSConfig(simulations=30, expand_k=3, wave_size=3, selection=selection, answer=answer)
    results, policy, scorer, _ = search(config)
    for result in results:
        assert result.trajectory.text == "y = 2\n#### 7\n"  # x scores best after one step, y finishes best
        assert (result.answer, result.correct) == ("7", True)
        assert result.details["simulations"] == 30
        assert result.details["nodes"] == 13 and result.details["finished_leaves"] == 9
        assert result.details["finished_right"] == 1  # of the nine finished leaves only "#### 7" is right
        assert result.details["depth"] == 2
        assert result.tokens == 3 * STEP + 9 * FINAL  # every node's step once; revisits sample nothing
    # wave 1 expands 3 roots by 3, wave 2 three leaves in each of 3 trees by 3; later waves only revisit
    assert policy.calls == [(9, 0.8), (27, 0.8)]
    assert scorer.calls == [9, 27]


def test_one_wave_is_one_sampling_call_and_virtual_loss_spreads_the_leaves():
    policy, scorer = ScriptedPolicy(), TableScorer()
    mcts = MCTS(policy, SevenEnv(), scorer, MCTSConfig(simulations=12, expand_k=3, wave_size=3))
    trees = mcts.grow(STARTS, sample_key=1)
    assert policy.calls == [(9, 0.8), (27, 0.8)] and scorer.calls == [9, 27]
    for tree in trees:
        assert all(len(child.children) == 3 for child in tree.root.children)  # three distinct leaves, one wave
        assert all(n.virtual_loss == 0 for n in walk(tree.root))
        assert tree.root.visits == 12 and tree.simulations == 12
        x, y, z = tree.root.children
        assert x.q == pytest.approx((0.7 + 0.1 + 0.2 + 0.1) / 4)  # mean backup of its own and its children's
        assert y.q == pytest.approx((0.5 + 0.95 + 0.3 + 0.3) / 4)
        assert tree.root.value_sum == pytest.approx(sum(SCORES.values()))


def test_puct_priors_are_the_softmax_of_the_candidates_mean_log_probs():
    logprobs = {"x = 1\n": -0.5, "y = 2\n": -1.0, "z = 3\n": -2.0}
    policy = ScriptedPolicy(logprobs=logprobs)
    mcts = MCTS(policy, SevenEnv(), TableScorer(), MCTSConfig(simulations=3, expand_k=3))
    (tree,) = mcts.grow(STARTS[:1], sample_key=1)
    weights = [math.exp(v) for v in logprobs.values()]
    assert [c.prior for c in tree.root.children] == pytest.approx([w / sum(weights) for w in weights])


def test_budgets_simulations_tokens_and_depth_are_honoured():
    # 5 simulations with k=3: the root gets 3 children, then one leaf gets the 2 left
    (result, *_), policy, *_ = search(MCTSConfig(simulations=5, expand_k=3, wave_size=3))
    assert result.details["simulations"] == 5 and result.details["nodes"] == 6
    # tokens: no wave starts after the first one passed 10 tokens; the most-visited leaf (all tied on
    # visits: the best Q, x) is finished greedily and its tokens count
    (result, *_), policy, *_ = search(MCTSConfig(simulations=30, expand_k=3, max_tokens=10), STARTS[:1])
    assert result.details["simulations"] == 3 and result.details["finish_tokens"] == FINAL
    assert result.tokens == 3 * STEP + FINAL
    assert result.trajectory.text == "x = 1\n#### 5\n" and (result.answer, result.correct) == ("5", False)
    assert policy.calls == [(3, 0.8), (1, 0.0)]  # the wave, then the greedy finish
    # depth 1: the children are terminal, later selections only revisit them
    (result, *_), policy, *_ = search(MCTSConfig(simulations=9, expand_k=3, max_depth=1), STARTS[:1])
    assert result.details["nodes"] == 4 and result.details["depth"] == 1 and result.details["simulations"] == 9
    assert result.details["finished_leaves"] == 0 and result.details["chosen_depth"] == 1


def test_rollout_evaluation_plays_to_the_end_and_counts_the_rollouts_tokens():
    policy = ScriptedPolicy()
    mcts = MCTS(policy, SevenEnv(), None, MCTSConfig(simulations=3, expand_k=3, evaluation="rollout"))
    (tree,) = mcts.grow(STARTS[:1], sample_key=1)
    # each child's rollout takes the script's first finish: x -> 5, y -> 7 (reward 1), z -> 1
    assert [c.score for c in tree.root.children] == [0.0, 1.0, 0.0]
    assert tree.tokens == 3 * STEP + 3 * FINAL and policy.calls == [(3, 0.8), (3, 0.8)]
    (result,) = mcts.answer([tree])
    assert result.trajectory.text == "y = 2\n#### 7\n" and result.tokens == 3 * STEP + 4 * FINAL


def hashed_scorer(branches):
    """A deterministic StepScorer over any text: each step's score from a hash of the text so far."""
    return [[zlib.crc32(b.text.encode()) % 101 / 100] * b.steps for b in branches]


class HashScorer:
    def score_branches(self, branches):
        return hashed_scorer(branches)


def test_on_the_tiny_model_siblings_differ_tokens_add_up_and_runs_repeat(tiny_policy):
    env = make("Arithmetic-v0", level=3, split="test", mode="stepwise", max_steps=3)
    calls = []
    original = tiny_policy.sample
    tiny_policy.sample = lambda prompts, *a, **k: calls.append(len(prompts)) or original(prompts, *a, **k)
    config = MCTSConfig(simulations=8, expand_k=2, wave_size=2, max_new_tokens=6)
    mcts = MCTS(tiny_policy, env, HashScorer(), config)
    trees = mcts.grow([{"seed": 0}, {"seed": 1}], sample_key=5)
    for tree in trees:
        nodes = list(walk(tree.root))
        assert tree.tokens == sum(n.tokens for n in nodes) and tree.simulations == 8
        assert all(n.tokens == sum(n.branch.mask) - sum(n.parent.branch.mask) for n in nodes[1:])
        assert len({c.branch.text for c in tree.root.children}) == 2  # each sibling has its own noise
    # one call per wave, holding both trees' rows: roots by 2, then 2 leaves by 2, then the 2 simulations left
    assert calls == [4, 8, 4]
    results = mcts.answer(trees)
    again = MCTS(tiny_policy, env, HashScorer(), config).search([{"seed": 0}, {"seed": 1}], sample_key=5)
    assert [r.trajectory.text for r in again] == [r.trajectory.text for r in results]
    assert [r.tokens for r in again] == [r.tokens for r in results]


def test_bad_settings_and_scores_are_one_line_errors():
    with pytest.raises(ConfigError, match=r"^MCTSConfig.selection must be one of puct, ucb1, got 'uct'$"):
        MCTSConfig(selection="uct")
    with pytest.raises(ConfigError, match=r"^MCTSConfig.expand_k must be a positive integer, got 0$"):
        MCTSConfig(expand_k=0)
    with pytest.raises(ConfigError, match=r"^MCTSConfig.max_tokens must be a positive integer or None, got -3$"):
        MCTSConfig(max_tokens="-3")
    with pytest.raises(ConfigError, match=r"^MCTSConfig.simulations expects an integer, got 'many'$"):
        MCTSConfig(simulations="many")
    with pytest.raises(ValueError, match=r"^MCTS: evaluation 'prm' needs a scorer"):
        MCTS(ScriptedPolicy(), SevenEnv(), None, MCTSConfig())
    policy = ScriptedPolicy()
    mcts = MCTS(policy, SevenEnv(), TableScorer({**SCORES, "y = 2\n": 1.5}), MCTSConfig(simulations=3, expand_k=3))
    with pytest.raises(ValueError, match=r"^step scorer returned 1.5 for branch 1; scores must be numbers in \[0, 1"):
        mcts.search(STARTS[:1])
    branches = mcts.engine.start(STARTS[:1])
    with pytest.raises(ValueError, match=r"^step scorer returned 1 scores for branch 0 with 0 steps$"):
        checked_scores([[0.5]], branches)
    with pytest.raises(ValueError, match=r"^step scorer returned 0 score lists for 1 branches$"):
        checked_scores([], branches)
