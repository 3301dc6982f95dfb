"""The generic env base: no default reward and no math grader; the math envs bring both."""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from lmgym.envs import GSM8KEnv, LanguageEnv, MathDatasetEnv, MathEnv, NoRewardError, Problem, correctness_reward
from lmgym.moved import MovedModuleWarning
from tests.tiers import slow


class Echo(LanguageEnv):
    num_problems = 1

    def get_problem(self, index: int) -> Problem:
        return Problem("Say yes", "yes", "0")


class EchoMath(MathEnv):
    num_problems = 1

    def get_problem(self, index: int) -> Problem:
        return Problem("What is 2 + 2?", "4", "0")


def test_a_generic_env_without_rewards_refuses_to_step_in_one_line():
    env = Echo()
    assert env.reward_fns == {}
    env.reset(seed=0)  # problems, prompts and state work without rewards
    with pytest.raises(NoRewardError, match=r"^Echo has no reward functions: pass reward_fns=.*default_reward_fns$"):
        env.step("yes")


def test_given_rewards_score_a_generic_env():
    env = Echo(reward_fns={"exact": lambda completion, gold, info: float(info["correct"])})
    env.reset(seed=0)
    assert env.step("yes")[1] == 1.0


def test_math_envs_supply_the_graders_correctness_reward():
    env = EchoMath()
    assert env.reward_fns == {"correctness": correctness_reward}
    env.reset(seed=0)
    assert env.step("2 + 2 = 4\n#### 4")[1] == 1.0
    assert EchoMath(reward_fns={"mine": lambda c, g, i: 0.5}).reward_fns.keys() == {"mine"}


@slow
def test_importing_the_env_base_loads_no_math_grader():
    code = ("import sys, lmgym.envs.base\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'sympy', 'latex2sympy2_extended', 'torch'})\n"
            "grader = sorted(m for m in sys.modules if m in ('lmgym.envs.answers', 'lmgym.envs.rewards.functions'))\n"
            "print(heavy + grader)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_math_dataset_base_has_its_own_name_and_the_old_one_warns():
    assert issubclass(GSM8KEnv, MathDatasetEnv)
    with pytest.warns(MovedModuleWarning, match="DatasetEnv is now MathDatasetEnv"):
        from lmgym.envs.math import DatasetEnv
    assert DatasetEnv is MathDatasetEnv
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from lmgym.envs import DatasetEnv as trl_style
    assert trl_style is not MathDatasetEnv
