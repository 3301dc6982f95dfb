"""Cheaper branch state saves: `deep_copy` is `copy.deepcopy` (values, independence, aliasing), and the engine's
one copy per step (it takes the env's own objects as a branch's state, then detaches the env) still keeps every
branch's state its own: no branch, and no later direct use of the env, sees another's steps."""
import copy
from dataclasses import dataclass, field

import gymnasium
import pytest

from lmgym.core.state_copy import deep_copy
from lmgym.envs import RAGHotpotQAEnv
from lmgym.episodes import EpisodeEngine, SamplingSettings, detach_branch_state, get_branch_state, set_branch_state
from tests.rag_toys import RECORDS, ToyStore
from tests.test_batched_env_steps import KeyedPolicy


@dataclass
class Box:
    items: list = field(default_factory=list)


@dataclass(frozen=True)
class Frozen:  # an env's Problem: frozen, with a dict of row fields
    name: str
    row: dict = field(default_factory=dict, hash=False)


@dataclass
class Hooked:  # its own __deepcopy__: deep_copy must call it, as copy.deepcopy does
    items: list

    def __deepcopy__(self, memo):
        return Hooked(["hooked"])


def test_deep_copy_is_deepcopy_with_aliases_kept_and_nothing_shared():
    shared = ["a", 1]
    box = Box([shared])
    value = {"x": [shared, shared, {"k": (1, [2])}], "box": box, "again": box, "t": (shared,), "s": {3}, 2.5: None,
             "nested": [[[["deep"]]]], "b": b"raw", "problem": Frozen("p", {"rows": [shared]}),
             "hooked": Hooked([1])}
    copied = deep_copy(value)
    assert copied == copy.deepcopy(value)
    assert copied["problem"] is not value["problem"] and copied["problem"].row["rows"][0] is copied["x"][0]
    assert copied["hooked"].items == ["hooked"]
    assert copied["x"][0] is copied["x"][1] is copied["t"][0] is copied["box"].items[0]  # aliases stay aliases
    assert copied["box"] is copied["again"] and copied["x"][0] is not shared and copied["box"] is not box
    copied["x"][0].append("changed")
    copied["x"][2]["k"][1].append(3)
    assert shared == ["a", 1] and value["x"][2]["k"] == (1, [2])
    assert copied["b"] is value["b"] and deep_copy("s") == "s"


def test_one_copy_per_step_still_keeps_each_branch_s_state_its_own():
    env = gymnasium.wrappers.TimeLimit(RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), k=2, max_searches=2), 3)
    engine = EpisodeEngine(env, KeyedPolicy(), SamplingSettings(max_new_tokens=64))
    branches = engine.start([{"options": {"index": 0}}], 4)  # the four share their start state
    start = copy.deepcopy(branches[0].state)
    engine.advance(branches, sample_key=1)
    engine.advance(branches[:2], sample_key=2)
    saved = [copy.deepcopy(b.state) for b in branches]
    assert len({repr(s) for s in saved}) > 1 and start["env"]["_steps"] == []
    for branch in branches:  # each state restores the episode it recorded: its own actions and nothing else
        assert branch.state["env"]["_steps"] == [a.text[: 20_000] for a in branch.actions]
        assert branch.state["wrappers"][0]["_elapsed_steps"] == branch.steps
    env.unwrapped.step("<search>Big Ben</search>")  # using the env directly afterwards changes no branch
    env.unwrapped._steps.append("more")
    assert [b.state for b in branches] == saved
    live = get_branch_state(env, copy=False)
    assert live["env"]["_steps"] is env.unwrapped._steps
    detach_branch_state(env)
    assert env.unwrapped._steps == live["env"]["_steps"] and env.unwrapped._steps is not live["env"]["_steps"]
    set_branch_state(env, branches[3].state)
    env.unwrapped._steps.append("x")
    assert branches[3].state == saved[3]


def test_a_failing_step_leaves_the_other_branches_states_their_own():
    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), k=2, max_searches=2)
    engine = EpisodeEngine(env, KeyedPolicy(), SamplingSettings(max_new_tokens=64))
    branches = engine.start([{"options": {"index": 1}}], 3)
    step = env.step
    calls = []

    def third_fails(action):
        calls.append(action)
        if len(calls) == 3:
            raise RuntimeError("env broke")
        return step(action)

    env.step = third_fails
    with pytest.raises(RuntimeError, match="env broke"):
        engine.advance(branches, sample_key=1)
    stepped = copy.deepcopy([b.state for b in branches[:2]])
    env._steps.append("after the failure")
    assert [b.state for b in branches[:2]] == stepped and branches[2].state["env"]["_steps"] == []
