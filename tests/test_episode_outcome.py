"""`EpisodeOutcome`: the typed, frozen per-episode facts a trajectory carries; read from an env's info, recorded
by the engine, round-tripped through the replay buffer and a checkpoint."""
import copy
import dataclasses
import json
import pickle

import pytest

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.buffers import ActionRecord, EpisodeOutcome, ReplayBuffer, Trajectory
from lmgym.envs.base import Problem
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from tests.tiers import slow
from tests.toy_env import DigitsEnv, digit_fraction

FINAL_INFO = {"gold": "2", "problem_id": "arith/7", "correct": True, "parsed_answer": "2", "unparseable": False,
              "reward_components": {"correctness": 1, "format": None}, "reward_errors": {"length": "ValueError: x"},
              "steps": ["1 + 1 = 2"], "turn_answers": ["3", "2"], "turn_correct": [False, True]}


def test_from_info_reads_the_envs_keys_and_leaves_the_rest():
    outcome = EpisodeOutcome.from_info(FINAL_INFO, [ActionRecord("actor", "1 + 1 = 3", "Check it.", "user")])
    assert (outcome.correct, outcome.parsed_answer, outcome.problem_id) == (True, "2", "arith/7")
    assert outcome.reward_components == {"correctness": 1.0, "format": None}
    assert type(outcome.reward_components["correctness"]) is float
    assert outcome.reward_errors == {"length": "ValueError: x"}
    assert (outcome.turn_answers, outcome.turn_correct) == (("3", "2"), (False, True))
    assert outcome.actions == (ActionRecord("actor", "1 + 1 = 3", "Check it.", "user"),)
    assert EpisodeOutcome.from_info({"question": "q"}) == EpisodeOutcome()  # nothing reported: the defaults
    assert EpisodeOutcome().correct is False and EpisodeOutcome().parsed_answer is None
    assert EpisodeOutcome.from_info({"problem_id": 3}).problem_id == "3"


def test_an_outcome_is_frozen_inside_and_out():
    outcome = EpisodeOutcome.from_info(FINAL_INFO, [ActionRecord("policy", "a")])
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.correct = False
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.actions[0].text = "b"
    with pytest.raises(TypeError):
        outcome.reward_components["correctness"] = 0.0
    with pytest.raises(TypeError):
        outcome.reward_errors["new"] = "x"
    assert isinstance(outcome.turn_correct, tuple) and isinstance(outcome.actions, tuple)
    info = dict(FINAL_INFO, reward_components={"correctness": 1.0})
    kept = EpisodeOutcome.from_info(info)
    info["reward_components"]["correctness"] = 0.0  # the env's dict changes later: the outcome does not
    assert kept.reward_components == {"correctness": 1.0}


@pytest.mark.parametrize("info,message", [
    ({"correct": "yes"}, "^episode outcome: correct must be a bool, got str 'yes'$"),
    ({"parsed_answer": 2}, "^episode outcome: parsed_answer must be a str or None, got int 2$"),
    ({"reward_components": [1.0]}, r"^episode outcome: reward_components must be a mapping \(name -> value\), got "
                                   r"list$"),
    ({"reward_components": {"x": "high"}}, "^reward component 'x' must be a number or None, got 'high'$"),
    ({"reward_components": {"x": float("nan")}}, "^reward component 'x' must be a number or None, got nan$"),
    ({"reward_components": {1: 0.5}}, "keys must be reward function names"),
    ({"reward_errors": {"fmt": 3}}, r"^episode outcome: reward_errors\['fmt'\] must be a str, got int$"),
    ({"problem_id": None}, "^episode outcome: problem_id must be a str, got NoneType None$"),
    ({"turn_correct": "yes"}, "^episode outcome: turn_correct must be a list, got str$"),
    ({"turn_correct": [True, 1]}, r"^episode outcome: turn_correct\[1\] must be a bool, got int 1$"),
    ({"turn_answers": ["1"], "turn_correct": [True, False]}, "turn_answers has 1 entries but turn_correct 2"),
])
def test_a_wrongly_typed_info_key_is_a_one_line_error_naming_it(info, message):
    with pytest.raises(ValueError, match=message):
        EpisodeOutcome.from_info(info)
    with pytest.raises(ValueError, match="info must be a mapping, got list"):
        EpisodeOutcome.from_info([])
    with pytest.raises(ValueError, match="an action's role must be a non-empty str"):
        ActionRecord("", "text")


def test_plain_data_pickle_and_copies_give_the_same_outcome():
    outcome = EpisodeOutcome.from_info(FINAL_INFO, [ActionRecord("actor", "a", "\n"), ActionRecord("critic", "b")])
    data = json.loads(json.dumps(outcome.to_dict()))
    assert EpisodeOutcome.from_dict(data) == outcome
    assert pickle.loads(pickle.dumps(outcome)) == outcome  # trajectories are gathered across processes
    assert copy.deepcopy(outcome) == outcome and copy.copy(outcome) == outcome
    with pytest.raises(ValueError, match="^outcome: unknown field"):
        EpisodeOutcome.from_dict({**data, "verdict": True})
    with pytest.raises(ValueError, match=r"^outcome: actions\[0\] must be an object with role, text"):
        EpisodeOutcome.from_dict({**data, "actions": [["actor", "a"]]})


def test_a_trajectory_built_without_an_outcome_reads_it_from_its_info():
    t = Trajectory([1], [2], [0.0], [1], 1.0, info=dict(FINAL_INFO))
    assert t.outcome == EpisodeOutcome.from_info(FINAL_INFO)
    given = EpisodeOutcome(correct=True, problem_id="p")
    assert Trajectory([1], [2], [0.0], [1], 1.0, info={"correct": False}, outcome=given).outcome is given
    with pytest.raises(ValueError, match="^Trajectory: outcome must be an EpisodeOutcome, got dict$"):
        Trajectory([1], [2], [0.0], [1], 1.0, outcome={"correct": True})
    with pytest.raises(ValueError, match="correct must be a bool"):
        Trajectory([1], [2], [0.0], [1], 1.0, info={"correct": "maybe"})


def test_the_replay_buffer_round_trips_outcomes_and_loads_files_written_before_them(tmp_path):
    actions = (ActionRecord("actor", "x = 1\n", "<result>1</result>", "tool"), ActionRecord("actor", "#### 2"))
    t = Trajectory([1], [2, 3], [-0.1, -0.2], [1, 1], 1.0, info={"correct": False},
                   outcome=EpisodeOutcome.from_info(FINAL_INFO, actions))
    buffer = ReplayBuffer(4)
    buffer.add(t)
    buffer.save(tmp_path / "b.jsonl")
    assert ReplayBuffer.load(tmp_path / "b.jsonl")[0].outcome == t.outcome  # saved, not re-read from info

    old = {key: value for key, value in t.to_dict().items() if key != "outcome"}  # an older version's record
    old["info"] = dict(FINAL_INFO)
    (tmp_path / "old.jsonl").write_text(json.dumps({"capacity": 2, "count": 1}) + "\n" + json.dumps(old) + "\n")
    assert ReplayBuffer.load(tmp_path / "old.jsonl")[0].outcome == EpisodeOutcome.from_info(FINAL_INFO)

    bad = dict(t.to_dict(), outcome={"correct": "no"})
    (tmp_path / "bad.jsonl").write_text(json.dumps({"capacity": 2, "count": 1}) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: episode outcome: correct must be a bool, got str 'no'$"):
        ReplayBuffer.load(tmp_path / "bad.jsonl")


def flaky(completion: str, gold: str, info: dict) -> float:
    """Fails on odd problems: every episode of those reports a reward error."""
    if int(info["problem_id"]) % 2:
        raise ZeroDivisionError("odd problem")
    return 1.0


class TwoTurnDigits(DigitsEnv):
    """Two actions an episode, a "tool" turn between them; correct on even problems."""

    def __init__(self):
        super().__init__(mode="stepwise", max_steps=2, reward_fns={"digits": digit_fraction, "flaky": flaky})

    def is_final_action(self, action: str) -> bool:
        return self.steps_taken == 1

    def respond(self, action: str, final: bool) -> tuple[str, str | None]:
        return ("", None) if final else (f"noted {len(action)}", "tool")

    def is_correct(self, parsed_answer: str, problem: Problem) -> bool:
        return int(problem.problem_id) % 2 == 0


def replay_grpo(out) -> GRPO:
    tok = build_tiny_tokenizer()
    config = GRPOConfig(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                        micro_batch_size=8, eval_at_start=False, progress=False, seed=0, replay_iterations=1,
                        output_dir=str(out))
    return GRPO(HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu"), TwoTurnDigits(), config)


@slow
def test_episode_outcomes_round_trip_through_a_checkpointed_replay_buffer(tmp_path):
    algo = replay_grpo(tmp_path / "run")
    algo.train()
    before = [t.outcome for t in algo.buffer]
    assert len(before) == 8 and {t.iteration for t in algo.buffer} == {0, 1}
    assert {o.correct for o in before} == {True, False} and any(o.reward_errors for o in before)
    assert all([(a.injected_text[:6], a.injected_role) for a in o.actions] == [("noted ", "tool"), ("", None)]
               for o in before)
    folder = algo.save()
    lines = (folder / "buffer.jsonl").read_text().splitlines()[1:]
    assert [EpisodeOutcome.from_dict(json.loads(line)["outcome"]) for line in lines] == before

    resumed = replay_grpo(tmp_path / "run")
    assert len(resumed.buffer) == 0
    resumed.resume_from(tmp_path / "run")
    assert [t.outcome for t in resumed.buffer] == before
