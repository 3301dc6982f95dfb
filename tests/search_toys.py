"""A scripted policy and a scripted step scorer for the search tests.

`ScriptedPolicy` reads each prompt's transcript (the env's observation, encoded raw) and answers with the
next candidate listed for the steps written so far: `script` maps the solution so far (the text after the
question's line) to candidate next steps, handed out in turn (temperature 0: always the first). It records
every `sample` call's prompt count and sampling settings. `ScriptedScorer` scores each step by its text from a table.
"""
from __future__ import annotations

from collections import defaultdict

from lmgym.policies import Generation, Policy, build_tiny_tokenizer

STEP_LOGPROB = -0.5


class ScriptedPolicy(Policy):
    def __init__(self, script: dict[str, list[str]], default: str = "#### 0\n"):
        self.tokenizer = build_tiny_tokenizer()
        self.script, self.default = script, default
        self.handed_out: dict[str, int] = defaultdict(int)
        self.calls: list[int] = []  # prompts per sample call
        self.settings: list[tuple[int, float]] = []  # (max_new_tokens, temperature) per sample call
        self.sampled = 0  # tokens sampled in all

    def format_prompt(self, observation: str) -> list[int]:
        return self.encode_text(observation)

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        self.calls.append(len(prompts))
        self.settings.append((max_new_tokens, temperature))
        out = []
        for prompt in prompts:
            solution = self.tokenizer.decode(prompt).split("\n", 1)[1]
            candidates = self.script.get(solution, [self.default])
            row = []
            for _ in range(n):
                k = 0 if temperature == 0 else self.handed_out[solution] % len(candidates)
                self.handed_out[solution] += temperature != 0
                ids = self.encode_text(candidates[k])[:max_new_tokens]
                self.sampled += len(ids)
                row.append(Generation(list(prompt), ids, [STEP_LOGPROB] * len(ids), self.tokenizer.decode(ids),
                                      "stop" if len(ids) < max_new_tokens else "length"))
            out.append(row)
        return out

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0):
        raise NotImplementedError("the scripted policy only samples")


class ScriptedScorer:
    """Scores each step by its text (`table`, else `default`); counts calls and branches scored."""

    def __init__(self, table: dict[str, float], default: float = 0.5):
        self.table, self.default = table, default
        self.calls: list[int] = []

    def score_branches(self, branches):
        self.calls.append(len(branches))
        return [[self.table.get(step, self.default) for step in b.info.get("steps", [])] for b in branches]
