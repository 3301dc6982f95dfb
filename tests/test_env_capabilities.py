"""Env capabilities (`is_multi_step`, `is_stepwise`) are properties every registered env answers, read through
wrappers; nothing outside the env compares `mode` strings."""
from pathlib import Path
from types import SimpleNamespace

import gymnasium
import pytest
from gymnasium.wrappers import TimeLimit

from lmgym.algorithms.losses import completion_budget
from lmgym.envs import make, registered_ids
from lmgym.episodes import is_multi_step, is_stepwise, next_stop_strings
from tests.rag_toys import RECORDS, ToyStore

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DATA = {"GSM8K": SHARED_DATA / "gsm8k" / "train.jsonl", "MATH": SHARED_DATA / "math500" / "test.jsonl"}

# id -> (is_multi_step, is_stepwise) of the env as registered
EXPECTED = {
    "Arithmetic-v0": (False, False), "ArithmeticStepwise-v0": (True, True),
    "GSM8K-v0": (False, False), "GSM8KStepwise-v0": (True, True),
    "MATH-v0": (False, False), "MATHStepwise-v0": (True, True),
    "ToolArithmetic-v0": (True, False), "HotpotQA-v0": (False, False), "RAG-HotpotQA-v0": (True, False),
    "Questions-v0": (True, True), "Reflection-MATH-v0": (True, False), "Reflection-GSM8K-v0": (True, False),
    "Reflection-Arithmetic-v0": (True, False), "Dataset-v0": (False, False),
}


def built_in_ids() -> list[str]:
    """The toolkit's own registrations (not the lmgym/ and rlgym/ aliases, nor ids tests register)."""
    return [i for i in registered_ids() if not i.startswith(("lmgym/", "rlgym/"))
            and str(gymnasium.spec(i).entry_point).startswith("lmgym.envs.")]


def build(env_id: str):
    """`make(env_id)` offline: shared data files, in-code HotpotQA records and store, a user question."""
    kwargs = {}
    for prefix, path in DATA.items():
        if prefix in env_id:
            if not path.is_file():
                pytest.skip(f"shared data file not found: {path}")
            kwargs["data_path"] = str(path)
    if "HotpotQA" in env_id:
        kwargs["records"] = RECORDS
    if env_id.startswith("RAG"):
        kwargs["store"] = ToyStore()
    if env_id.startswith("Questions"):
        kwargs["questions"] = ["What is 3 + 4?"]
    if env_id.startswith("Dataset"):
        kwargs.update(dataset=[{"prompt": [{"role": "user", "content": "What is 3 + 4?"}]}],
                      reward_fns=[lambda completions, **kwargs: [0.0] * len(completions)])
    return make(env_id, **kwargs)


@pytest.mark.parametrize("env_id", built_in_ids())
def test_every_registered_env_states_its_capabilities_and_its_episodes_keep_them(env_id):
    assert env_id in EXPECTED, f"add {env_id}'s (is_multi_step, is_stepwise) to EXPECTED"
    env = build(env_id)
    assert (env.is_multi_step, env.is_stepwise) == EXPECTED[env_id]
    assert (is_multi_step(env), is_stepwise(env)) == EXPECTED[env_id]
    env.reset(seed=0)
    terminated = env.step("Hmm.")[2]  # no tool call, no final answer
    assert terminated is not env.is_multi_step  # a single-step env ends on its one action; the others go on


def test_capabilities_are_read_through_wrappers_and_a_wrapper_may_declare_its_own():
    stepwise = make("ArithmeticStepwise-v0")
    wrapped = TimeLimit(stepwise, max_episode_steps=3)
    assert (is_multi_step(wrapped), is_stepwise(wrapped)) == (True, True)
    assert wrapped.get_wrapper_attr("is_multi_step") is True  # gymnasium's own forwarding

    class OneShot(gymnasium.Wrapper):
        is_multi_step = False  # e.g. a wrapper that ends every episode after its first action

    assert is_multi_step(OneShot(stepwise)) is False and is_stepwise(OneShot(stepwise)) is True


def test_plain_envs_say_nothing_and_get_the_single_action_defaults():
    class Plain:
        """A duck-typed env (not a LanguageEnv) that declares no capability and no stop strings."""

    class Stepwise(Plain):
        is_multi_step, is_stepwise = True, True

    assert (is_multi_step(Plain()), is_stepwise(Plain()), next_stop_strings(Plain())) == (False, False, None)
    assert (is_multi_step(Stepwise()), next_stop_strings(Stepwise())) == (True, ["\n"])

    class Wrong(Plain):
        is_multi_step = "stepwise"

    with pytest.raises(ValueError, match="^Wrong.is_multi_step must be a bool; got 'stepwise'$"):
        is_multi_step(Wrong())


def test_the_completion_budget_counts_every_action_of_a_multi_step_env_through_a_wrapper():
    config = SimpleNamespace(loss_length_normalizer=None, max_new_tokens=16)
    assert completion_budget(config, make("Arithmetic-v0")) == 16
    assert completion_budget(config, make("ArithmeticStepwise-v0", max_steps=5)) == 80
    assert completion_budget(config, TimeLimit(make("ArithmeticStepwise-v0", max_steps=5), 3)) == 48
    assert completion_budget(config, make("ToolArithmetic-v0", max_steps=4)) == 64
