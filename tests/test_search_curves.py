"""evaluate_curves: every method at every budget on a scripted policy, each run stopped at the same token
count; its rows, table, PNG and bad requests. Tiny tokenizer: one token per character."""
import dataclasses
import json

import pytest

from lmgym.envs import make
from lmgym.evaluation.curves import curve_name, evaluate_curves, save_curves
from lmgym.search import SearchSettings
from lmgym.search.mcts import MCTSConfig
from tests.search_toys import ScriptedPolicy, ScriptedScorer


def env_and_script():
    env = make("Arithmetic-v0", level=1, split="train", mode="stepwise", max_steps=3)
    gold = env.get_problem(0).gold  # two digits (21 + 16): the token counts below rest on it
    # every episode: "a = 1\n" (6 tokens), then the gold answer: 14 tokens when gold has two digits
    return env, {"": ["a = 1\n"], "a = 1\n": [f"#### {gold}\n"]}, 6 + len(f"#### {gold}\n")


METHODS = [SearchSettings(method="maj", n=2), SearchSettings(method="weighted_maj", n=2),
           SearchSettings(method="best_of_n", n=2), SearchSettings(method="beam", beam_width=2, beam_expand=2),
           SearchSettings(method="mcts", mcts=MCTSConfig(expand_k=2, wave_size=1, answer="vote"))]


def test_every_method_stops_at_the_same_token_count_and_the_rows_are_right(tmp_path):
    env, script, episode = env_and_script()
    assert episode == 14
    policy = ScriptedPolicy(script)
    rows = evaluate_curves(policy, env, METHODS, [60, 10, 30], ScriptedScorer({}), episodes=1)
    got = [(r["method"], r["budget"], r["accuracy"], r["tokens_per_problem"]) for r in rows]
    assert got == [
        # 10: the first 10 tokens of the first sample, cut: no method has an answer
        # 30: two whole episodes (28), the third cut at 30; 60: four whole (56), the fifth cut
        ("maj", 10, 0.0, 10), ("maj", 30, 1.0, 30), ("maj", 60, 1.0, 60),
        ("weighted_maj", 10, 0.0, 10), ("weighted_maj", 30, 1.0, 30), ("weighted_maj", 60, 1.0, 60),
        ("best_of_n", 10, 0.0, 10), ("best_of_n", 30, 1.0, 30), ("best_of_n", 60, 1.0, 60),
        # beam 2x2: step 1 is 4 x 6 = 24, step 2 is 4 x 8 = 32: the 30 cap cuts step 2's first candidate
        # (no solution finished); under 60 it finishes at 56
        ("beam_2x2", 10, 0.0, 10), ("beam_2x2", 30, 0.0, 30), ("beam_2x2", 60, 1.0, 56),
        # mcts: 2 x 6 at the root, 2 x 8 below one child (28), the next child crosses 30; under 60 the
        # tree is complete at 12 + 4 x 8 = 44 (every leaf finished)
        ("mcts", 10, 0.0, 10), ("mcts", 30, 1.0, 30), ("mcts", 60, 1.0, 44),
    ]
    # what the batches really drew (past the caps: drawn, neither charged nor used): maj-like methods
    # 1 + 2 + 3 rounds of 28; beam 24, 56, 56; mcts 12 + the greedy finish 8 (cut), 12 + 16 + 16, 44
    assert policy.sampled == 3 * (28 + 56 + 84) + (24 + 56 + 56) + (20 + 44 + 44)
    markdown, data, png = save_curves(rows, tmp_path / "curves", {"level": 1})
    assert markdown.read_text().splitlines()[4] == "| maj | 60 | 100.0% | 60.0 | 1 |"
    assert json.loads(data.read_text())["rows"][0]["budget"] == 10
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_curve_names_and_bad_requests():
    assert [curve_name(m) for m in METHODS] == ["maj", "weighted_maj", "best_of_n", "beam_2x2", "mcts"]
    env, script, _ = env_and_script()
    policy = ScriptedPolicy(script)
    cases = [([], [10], "methods is empty"), (METHODS[:1], [], "budgets is empty"),
             (METHODS[:1], [10, 0], r"budgets must be integers >= 1 \(tokens per problem\), got 0"),
             (METHODS[:1], [10, 10], "budgets repeat a value"),
             ([SearchSettings()], [10], "greedy has one cost, not a budget"),
             ([METHODS[0], SearchSettings(method="maj", n=4)], [10], "two methods share the curve name 'maj'"),
             (METHODS[1:2], [10], "method weighted_maj@10tok needs a step scorer")]
    for methods, budgets, message in cases:
        with pytest.raises(ValueError, match=message):
            evaluate_curves(policy, env, methods, budgets, None, episodes=1)
    assert policy.calls == []


def finishing_everywhere():
    """A script where every state below depth 3 offers a finished "#### 7" (rated 0.95 by the table) beside two steps
    that go on (rated 0.3): a value guide that favours a finished leaf, so selection keeps revisiting it."""
    from itertools import product

    def steps(depth):
        return [f"s{depth}{c}\n" for c in "ab"]

    script, scores = {}, {"#### 7\n": 0.95, "#### 8\n": 0.2, "#### 9\n": 0.2}
    for depth in range(4):
        for state in product(*[steps(d) for d in range(depth)]):
            script[state] = ["#### 7\n", *steps(depth)] if depth < 3 else ["#### 7\n", "#### 8\n", "#### 9\n"]
        scores.update(dict.fromkeys(steps(depth), 0.3))
    return script, scores


def test_a_capped_tree_spends_its_tokens_even_when_its_value_guide_favours_a_finished_leaf():
    # a revisit of a finished leaf samples nothing but counts a simulation: with simulations equal to the budget
    # (the old rule) the tree stopped well short of it; capped's simulations leave room for the revisits
    from lmgym.evaluation.curves import SIMULATIONS_PER_TOKEN, capped
    from lmgym.search.mcts import MCTS
    from tests.mcts_toys import ScriptedPolicy as StepPolicy
    from tests.mcts_toys import SevenEnv, TableScorer

    script, scores = finishing_everywhere()
    settings = SearchSettings(method="mcts", mcts=MCTSConfig(simulations=8, expand_k=3, wave_size=4))

    def tokens(config):
        mcts = MCTS(StepPolicy(script=script), SevenEnv(max_steps=5), TableScorer(scores), config)
        (tree,) = mcts.grow([{"options": {"index": 0}}], sample_key=1)
        return tree.tokens, tree.simulations

    for budget in (80, 160):
        config = capped(settings, budget).mcts_config()
        assert (config.simulations, config.max_tokens) == (SIMULATIONS_PER_TOKEN * budget, budget)
        spent, simulations = tokens(config)
        assert spent == budget and simulations < config.simulations  # the cap ended it, not the simulations
        old_spent, old_simulations = tokens(dataclasses.replace(config, simulations=budget))
        assert old_simulations == budget and old_spent < 0.6 * budget  # 45 of 80, 75 of 160
