"""Turn-k accuracy and the per-turn wrong->right / right->wrong rates against hand values: recorded verdicts,
a scripted critic whose feedback makes the refinement right, an actor that ignores feedback; the plot."""
import re

import pytest

from lmgym.envs import ReflectionEnv
from lmgym.evaluation.reflection_metrics import (
    evaluate_reflection,
    plot_turn_accuracy,
    turn_accuracy_curve,
    turn_metrics,
)
from tests.test_reflection import REFINE, FixedTask, ScriptedRole

VERDICTS = [[False, True, False], [True, False, False], [True, True], [False, False, True]]


def test_turn_metrics_against_hand_values():
    found = turn_metrics([{"turn_correct": v} for v in VERDICTS], turns=3)
    # t2: wrong at t1 = episodes 0, 3 (0 fixed); right at t1 = 1, 2 (1 broken)
    # t3 (episodes 0, 1, 3 reach it): wrong at t2 = 1, 3 (3 fixed); right at t2 = 0 (broken)
    assert found == {"acc@t1": 0.5, "acc@t2": 0.5, "w2r@t2": 0.5, "r2w@t2": 0.5,
                     "acc@t3": pytest.approx(1 / 3), "w2r@t3": 0.5, "r2w@t3": 1.0}
    four = turn_metrics([{"turn_correct": v} for v in VERDICTS], turns=4)
    assert (four["acc@t4"], four["w2r@t4"], four["r2w@t4"]) == (None, None, None)  # no episode reached turn 4
    assert turn_metrics([{"turn_correct": [True, True]}], turns=2) == {"acc@t1": 1.0, "acc@t2": 1.0,
                                                                       "w2r@t2": None, "r2w@t2": 0.0}
    assert turn_accuracy_curve(four) == [0.5, 0.5, pytest.approx(1 / 3), None]
    with pytest.raises(ValueError, match="turns must be an int >= 1; got 0"):
        turn_metrics([{"turn_correct": [True]}], turns=0)
    with pytest.raises(ValueError, match="turn_metrics: no episodes"):
        turn_metrics([])


def test_a_critic_whose_feedback_makes_the_refinement_right(tiny_policy):
    golds = dict(zip(("Q0?", "Q1?", "Q2?"), FixedTask.GOLDS))  # 2, 3, 7

    def critic(seen, k):
        return f"The answer is {next(g for q, g in golds.items() if q in seen)}."

    def actor(seen, k):
        if REFINE not in seen:
            return "#### 2"  # right only on Q0
        return "#### " + re.findall(r"The answer is (\d+)\.", seen)[-1]

    players = {"actor": ScriptedRole(tiny_policy, actor), "critic": ScriptedRole(tiny_policy, critic)}
    result = evaluate_reflection(players, ReflectionEnv(FixedTask(), max_turns=3), episodes=3, turns=3)
    assert result["acc@t1"] == pytest.approx(1 / 3) and result["acc@t2"] == result["acc@t3"] == 1.0
    assert (result["w2r@t2"], result["r2w@t2"]) == (1.0, 0.0)  # both wrong answers fixed, the right one kept
    assert (result["w2r@t3"], result["r2w@t3"]) == (None, 0.0)  # nothing wrong left at turn 2
    assert result["p1@t1"] == pytest.approx(1 / 3) and result["p1@t3"] == result["m1@t3"] == 1.0


def test_an_actor_that_ignores_feedback_has_no_transitions(tiny_policy):
    players = {"actor": ScriptedRole(tiny_policy, lambda seen, k: "#### 2"),
               "critic": ScriptedRole(tiny_policy, lambda seen, k: "The answer is 7.")}
    result = evaluate_reflection(players, ReflectionEnv(FixedTask(), max_turns=3), episodes=3, turns=3)
    assert [result[f"acc@t{k}"] for k in (1, 2, 3)] == [pytest.approx(1 / 3)] * 3
    assert [result[f"{kind}@t{k}"] for k in (2, 3) for kind in ("w2r", "r2w")] == [0.0] * 4


def test_plot_turn_accuracy_draws_one_line_per_stage(tmp_path):
    path = plot_turn_accuracy({"base": {"acc@t1": 0.3, "acc@t2": 0.3}, "sft": [0.4, 0.55, None]},
                              tmp_path / "plots" / "turns.png", title="level 3")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="stage 'dpo' has no turn accuracy"):
        plot_turn_accuracy({"dpo": [None]}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="no acc@t1 in the metrics"):
        plot_turn_accuracy({"dpo": {"p1@t1": 0.5}}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="stages must be a non-empty mapping"):
        plot_turn_accuracy({}, tmp_path / "x.png")
