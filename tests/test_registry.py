"""Registry: ids, make, gymnasium's env checker on every id, errors, user-registered envs."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from lmgym import envs
from lmgym.envs import LanguageEnv, MathEnv, Problem, UnknownEnvError, make, register, registered_ids
from tests.tiers import slow

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DATA_FILES = {"GSM8K": SHARED_DATA / "gsm8k" / "train.jsonl", "MATH": SHARED_DATA / "math500" / "test.jsonl"}
BUILT_IN_IDS = ["Arithmetic-v0", "ArithmeticStepwise-v0", "GSM8K-v0", "GSM8KStepwise-v0", "MATH-v0", "MATHStepwise-v0",
                "ToolArithmetic-v0"]


def make_offline(env_id: str, **kwargs) -> LanguageEnv:
    """``make`` with the shared data files for the hub-backed ids (skips if they are absent)."""
    for prefix, path in DATA_FILES.items():
        if env_id.split("/")[-1].startswith(prefix):
            if not path.is_file():
                pytest.skip(f"shared data file not found: {path}")
            kwargs.setdefault("data_path", str(path))
    return make(env_id, **kwargs)


def test_built_in_ids_are_registered():
    assert set(BUILT_IN_IDS) <= set(registered_ids())


@slow
@pytest.mark.parametrize("env_id", BUILT_IN_IDS)
def test_gymnasium_check_env_passes_without_warnings(env_id):
    env = make_offline(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)
    assert env.spec is not None and env.spec.id == env_id


@pytest.mark.parametrize("mode", ["single", "stepwise"])
@pytest.mark.parametrize("level", [0, 2, 3, 4])
def test_check_env_passes_for_every_arithmetic_level(level, mode):
    check_env(make("Arithmetic-v0", level=level, mode=mode))


@pytest.mark.parametrize("env_id", BUILT_IN_IDS)
def test_make_returns_a_language_env_with_working_state(env_id):
    env = make_offline(env_id)
    assert isinstance(env, LanguageEnv) and env.unwrapped is env
    expected_mode = "stepwise" if "Stepwise" in env_id else "multi_turn" if "Tool" in env_id else "single"
    _, info = env.reset(seed=0)
    assert info["mode"] == expected_mode == env.mode
    saved = env.get_state()
    answer = f"<answer>{info['gold']}</answer>" if "Tool" in env_id else f"#### {info['gold']}"
    first = env.step(answer)
    assert first[1] == 1.0 and first[2] is True
    env.set_state(saved)
    assert env.step(answer) == first


def test_make_kwargs_override_registered_defaults():
    env = make("Arithmetic-v0", level=3, split="test")
    assert (env.level, env.split, env.mode) == (3, "test", "single")
    assert make("ArithmeticStepwise-v0", max_steps=2).max_steps == 2
    assert make(id="Arithmetic-v0").level == 1  # same keyword as gymnasium.make


def test_unknown_id_suggests_close_match_and_lists_known_ids():
    with pytest.raises(UnknownEnvError) as error:
        make("GSM8k-v0")
    message = str(error.value)
    assert "'GSM8k-v0'" in message and "did you mean 'GSM8K-v0'" in message
    assert all(env_id in message for env_id in BUILT_IN_IDS)
    assert "\n" not in message and not message.startswith('"')
    assert isinstance(error.value, KeyError)


def test_unknown_id_without_close_match_still_lists_known_ids():
    with pytest.raises(UnknownEnvError, match="unknown env id 'Chess-v3'; known ids: Arithmetic-v0"):
        make("Chess-v3")


def test_gymnasium_ids_are_not_language_envs():
    with pytest.raises(UnknownEnvError):
        make("CartPole-v1")


class CountdownEnv(MathEnv):
    """A user's math env: what is n - 1?"""

    @property
    def num_problems(self) -> int:
        return 20

    def get_problem(self, index: int) -> Problem:
        return Problem(f"What is {index} - 1?", str(index - 1), f"countdown/{index}")


def test_user_registers_and_makes_a_custom_env():
    register("Countdown-v0", CountdownEnv, instruction=" Answer after ####.")
    env = make("Countdown-v0")
    assert "Countdown-v0" in registered_ids()
    obs, info = env.reset(options={"index": 5})
    assert obs == "What is 5 - 1? Answer after ####."
    _, reward, terminated, _, _ = env.step("#### 4")
    assert (reward, terminated) == (1.0, True)
    check_env(make("Countdown-v0", mode="stepwise"))


def test_register_with_a_module_string_entry_point():
    register("ArithmeticLevel4-v0", "lmgym.envs.arithmetic:ArithmeticEnv", level=4)
    env = make("ArithmeticLevel4-v0")
    assert type(env).__name__ == "ArithmeticEnv" and env.level == 4


@slow
def test_importing_the_package_is_light():
    code = "import sys, lmgym; print(any(m in sys.modules for m in ('datasets', 'torch', 'transformers')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=Path(envs.__file__).resolve().parents[1])
    assert result.stdout.strip() == "False"


def test_public_names_are_exported():
    expected = {
        "make", "register", "registered_ids", "LanguageEnv", "AnyText", "EpisodeOverError", "UnknownEnvError",
        "DataFileNotFoundError", "MalformedRowError", "ArithmeticEnv", "GSM8KEnv", "MATHEnv",
        "correctness_reward", "format_reward", "extract_answer", "answers_equal",
    }
    assert expected <= set(envs.__all__) and all(hasattr(envs, name) for name in expected)
    assert not hasattr(envs, "combine_rewards")  # one combiner: lmgym.algorithms.reward_combination.combine


@pytest.mark.parametrize("env_id", BUILT_IN_IDS)
def test_built_in_ids_answer_to_the_lmgym_namespace_in_make_and_gymnasium_make(env_id):
    short, namespaced = make_offline(env_id), make_offline(f"lmgym/{env_id}")
    assert type(namespaced) is type(short) and namespaced.mode == short.mode
    assert namespaced.spec.id == f"lmgym/{env_id}" and namespaced.spec.kwargs == short.spec.kwargs
    kwargs = {"data_path": namespaced.spec.kwargs["data_path"]} if "data_path" in namespaced.spec.kwargs else {}
    assert type(gymnasium.make(f"lmgym/{env_id}", **kwargs).unwrapped) is type(short)
    with pytest.raises(UnknownEnvError, match="lmgym/Nope-v0"):
        make("lmgym/Nope-v0")
    assert type(make_offline(f"rlgym/{env_id}")) is type(short)  # 0.2.0's namespace, kept for one release


def fresh_process_lines(code: str, tmp_path) -> list[str]:
    """The first two stdout lines of `code` run in a fresh Python process (the repository on its path; skipped
    without the shared GSM8K file)."""
    if not DATA_FILES["GSM8K"].is_file():
        pytest.skip(f"shared data file not found: {DATA_FILES['GSM8K']}")
    root = Path(envs.__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False,
                            env={**os.environ, "PYTHONPATH": str(root)})
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\n")[:2]


@slow
def test_gymnasium_make_in_a_fresh_process_that_imports_only_gymnasium(tmp_path):
    code = (
        "import sys, gymnasium\n"
        "assert 'lmgym' not in sys.modules\n"
        "env = gymnasium.make('lmgym:lmgym/Arithmetic-v0', level=2)\n"
        "obs, info = env.reset(seed=0)\n"
        "print(type(env.unwrapped).__name__, env.spec.id, env.unwrapped.level, obs.startswith('What is'))\n"
        f"gsm = gymnasium.make('lmgym/GSM8K-v0', data_path={str(DATA_FILES['GSM8K'])!r}, subset=(0, 3))\n"
        "print(type(gsm.unwrapped).__name__, gsm.unwrapped.num_problems)\n"
    )
    assert fresh_process_lines(code, tmp_path) == ["ArithmeticEnv lmgym/Arithmetic-v0 2 True", "GSM8KEnv 3"]


@slow
def test_gymnasium_register_envs_takes_the_package_as_with_ale_py(tmp_path):
    """gymnasium.register_envs(lmgym) is a no-op taking the module; importing it registers the lmgym/ ids."""
    code = (
        "import gymnasium, lmgym\n"
        "gymnasium.register_envs(lmgym)\n"
        "env = gymnasium.make('lmgym/Arithmetic-v0', level=2)\n"
        "print(type(env.unwrapped).__name__, env.spec.id, env.reset(seed=0)[0].startswith('What is'))\n"
        f"gsm = gymnasium.make('lmgym/GSM8K-v0', data_path={str(DATA_FILES['GSM8K'])!r}, subset=(0, 3))\n"
        "print(type(gsm.unwrapped).__name__, gsm.unwrapped.num_problems)\n"
    )
    assert fresh_process_lines(code, tmp_path) == ["ArithmeticEnv lmgym/Arithmetic-v0 True", "GSM8KEnv 3"]
