"""A toy environment for learning tests: reward = fraction of completion characters that are digits.

With the character-level tiny model (about 100 symbols, 10 of them digits) a random policy scores
about 0.1, so any algorithm that learns shows a clear rise within a few dozen CPU iterations.
"""
from lmgym.envs import LanguageEnv, register
from lmgym.envs.base import Problem


def digit_fraction(completion: str, gold: str, info: dict) -> float:
    return sum(ch.isdigit() for ch in completion) / max(len(completion), 1)


class DigitsEnv(LanguageEnv):
    def __init__(self, **kwargs):
        kwargs.setdefault("reward_fns", {"digits": digit_fraction})
        super().__init__(**kwargs)

    @property
    def num_problems(self) -> int:
        return 4

    def get_problem(self, index: int) -> Problem:
        return Problem(question=f"Say digits {index}", gold="0", problem_id=str(index))

    def build_prompt(self, problem: Problem) -> str:
        return problem.question

    def parse_answer(self, solution: str) -> str | None:
        return solution  # every completion is scored


register("ToyDigits-v0", DigitsEnv)
