"""Scripted pieces for the MCTS tests: a stepwise env whose gold is 7, a policy that samples fixed candidate
steps per state (counting its sampling calls) and a step scorer reading a table (counting its calls)."""
from lmgym.envs.base import Problem
from lmgym.envs.math_env import MathEnv
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding.generation import Generation

# state (steps so far) -> candidate next steps; the best path is "y = 2" then "#### 7" (gold 7)
SCRIPT = {
    (): ["x = 1\n", "y = 2\n", "z = 3\n"],
    ("x = 1\n",): ["#### 5\n", "#### 6\n", "#### 4\n"],
    ("y = 2\n",): ["#### 7\n", "#### 8\n", "#### 9\n"],
    ("z = 3\n",): ["#### 1\n", "#### 2\n", "#### 3\n"],
}
# x looks best after one step, but only y leads to a good finish
SCORES = {"x = 1\n": 0.7, "y = 2\n": 0.5, "z = 3\n": 0.3, "#### 5\n": 0.1, "#### 6\n": 0.2, "#### 4\n": 0.1,
          "#### 7\n": 0.95, "#### 8\n": 0.3, "#### 9\n": 0.3, "#### 1\n": 0.05, "#### 2\n": 0.05, "#### 3\n": 0.05}


class SevenEnv(MathEnv):
    """Stepwise problems "Problem i" (i < 3), gold 7; "####" ends an episode."""

    def __init__(self, **kwargs):
        kwargs.setdefault("mode", "stepwise")
        kwargs.setdefault("max_steps", 4)
        super().__init__(**kwargs)

    @property
    def num_problems(self) -> int:
        return 3

    def get_problem(self, index: int) -> Problem:
        return Problem(question=f"Problem {index}", gold="7", problem_id=str(index))

    def build_prompt(self, problem: Problem) -> str:
        return problem.question


class ScriptedPolicy(HFPolicy):
    """Samples the script's candidates for each state: rows of one call sharing a state get candidates 0, 1,
    2, ... in turn (greedy, T=0: always the first). Each candidate's tokens get log-prob `logprobs[text]`
    (default -1.0). `calls` lists (rows, temperature) per sample call."""

    def __init__(self, script=None, logprobs=None):
        tok = build_tiny_tokenizer()
        super().__init__(build_tiny_model(tok), tok, device="cpu", use_chat_template=False)
        self.script, self.logprobs, self.calls = script or SCRIPT, logprobs or {}, []

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        assert n == 1
        self.calls.append((len(prompts), temperature))
        turns: dict[str, int] = {}
        out = []
        for ids in prompts:
            text = self.tokenizer.decode(ids)
            steps = tuple(line + "\n" for line in text.split("\n")[1:-1])
            turn = turns.get(text, 0) if temperature > 0 else 0
            turns[text] = turn + 1
            options = self.script[steps]
            choice = options[turn % len(options)]
            completion = self.encode_text(choice)
            lp = self.logprobs.get(choice, -1.0)
            out.append([Generation(list(ids), completion, [lp] * len(completion), choice, "stop")])
        return out


class TableScorer:
    """A StepScorer: each step's score is SCORES[step text]; `calls` lists the branches per call."""

    def __init__(self, table=None):
        self.table, self.calls = table or SCORES, []

    def score_branches(self, branches):
        self.calls.append(len(branches))
        return [[self.table[step] for step in b.info["steps"]] for b in branches]
