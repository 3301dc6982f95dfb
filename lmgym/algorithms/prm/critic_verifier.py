"""The trained reflection critic as a generative verifier: a solution's score is how likely the critic is to
approve it, for best-of-N and weighted majority beside the ORM and PRM (search's StepScorer contract).

The critic is a policy trained by examples/reflection_dpo.py (SFT, then DPO) in the *checked* style
(`lmgym.traindata.checked_feedback`): after the actor's answer and the env's critic request it first redoes each
step ("Check: 2 * 5 = 10; 5 + 10 = 15.") and then gives its verdict, one of the oracle's phrases: an approval
("All right; keep it.") or the wrong step ("Step 3 should give 12, not 14; ..."). Two ways to read a score:

- mode "verdict": the critic writes its check greedily (at most `work_tokens`), the text is cut where its
  verdict starts, and one teacher-forced forward pass reads the log-probability of each verdict's first word
  right there (`approve_words`: "All", "Every"; `reject_words`: "Step", "So", the first words of the checked
  phrases). The score is the approving words' share of that probability: sum(P(approve)) / sum(P(all)).
  The check is the critic's own work, never the oracle's: the verifier reads nothing of the gold.
- mode "votes": `votes` critic turns sampled at `temperature`; the score is the share that approve
  (`feedback_verdict`, the reading reflection's metrics use). Any critic style works here.

A critic judges a whole answer, so it is an outcome verifier: every step of a branch carries the branch's
score (aggregation "last", "min" and "mean" give that score). The question is the branch's problem as the
reflection env writes it (found by problem id), the answer the branch's text; the critic saw answers laid out
that way in training (`lmgym.traindata.reflection_sft.turn_tokens`).
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lmgym.core.checked_config import CheckedConfig, setting
from lmgym.envs.base import Problem
from lmgym.envs.reflection import ReflectionEnv
from lmgym.evaluation.reflection_critic_metrics import APPROVE, feedback_verdict
from lmgym.policies.base import Policy
from lmgym.policies.decoding.generation import Generation
from lmgym.traindata.checked_feedback import CHECKED_CORRECT_PHRASES, CHECKED_STEP_PHRASES
from lmgym.traindata.reflection_sft import ReflectionTurnExample, turn_tokens

CRITIC_MODES = ("verdict", "votes")
APPROVE_WORDS = tuple(dict.fromkeys(p.split()[0] for p in CHECKED_CORRECT_PHRASES))  # ("All", "Every")
REJECT_WORDS = tuple(dict.fromkeys(p.split()[0] for p in CHECKED_STEP_PHRASES))  # ("Step", "So")
MAX_ANSWER_CHARS = 4000  # model output is untrusted: a branch's answer is cut here before the critic reads it


@dataclass
class CriticVerifierConfig(CheckedConfig):
    """How the critic's approval becomes a score (see the module docstring)."""

    mode: str = setting("verdict", "verdict (P(approve) at the verdict, one teacher-forced pass after the greedy "
                                   "check) | votes (the share of sampled critic turns that approve)")
    work_tokens: int = setting(96, "tokens the critic may write before its verdict (its check; mode verdict), "
                                   "and per sampled turn (mode votes)")
    votes: int = setting(4, "critic turns sampled per solution (mode votes)")
    temperature: float = setting(1.0, "sampling temperature of the votes, > 0 (mode votes)")
    batch_size: int = setting(32, "solutions judged together")
    approve_words: tuple = setting(APPROVE_WORDS, "first words of an approving verdict (mode verdict)")
    reject_words: tuple = setting(REJECT_WORDS, "first words of a rejecting verdict (mode verdict)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("mode", self.mode in CRITIC_MODES, " | ".join(CRITIC_MODES))
        for name in ("work_tokens", "votes", "batch_size"):
            self.require(name, getattr(self, name) >= 1, "an int >= 1")
        self.require("temperature", self.temperature > 0, "> 0")
        for name in ("approve_words", "reject_words"):
            words = getattr(self, name)
            self.require(name, len(words) > 0 and all(isinstance(w, str) and w.strip() == w and w for w in words),
                         "one or more words without spaces around them")
        self.require("reject_words", not set(self.approve_words) & set(self.reject_words),
                     "words that approve_words does not hold")


def verdict_start(text: str, words: Sequence[str]) -> int:
    """Where the verdict begins in a critic's text: the first of `words` at the start or after a sentence's
    end (". "); len(text) when none is there (the verdict would come next)."""
    pattern = r"(?:^|(?<=[.!?])\s+)(" + "|".join(re.escape(w) for w in words) + r")\b"
    found = re.search(pattern, text)
    return found.start(1) if found else len(text)


class CriticVerifier:
    """A reflection critic that scores solutions (a StepScorer: `score_branches`), see the module docstring.

    Args:
        critic: the trained critic (one policy plays both roles in reflection_dpo.py; its model folder).
        env: the reflection env it was trained in (Reflection-Arithmetic-v0 of the level and split searched), for
            the question's prompt and the critic request; the branches' problems are found in it by problem id.
        config: CriticVerifierConfig.

    `tokens_generated` counts every token the critic generated (the completion ids of each `critic.sample`
    generation: the checks in mode verdict, every vote in mode votes) since it was made; search tables report
    it per problem beside the policy's tokens. The teacher-forced verdict pass is a forward pass over given
    tokens, not generation, and is not counted.
    """

    aggregation = "last"  # every step carries the solution's score

    def __init__(self, critic: Policy, env, config: CriticVerifierConfig | None = None):
        self.critic, self.config = critic, config if config is not None else CriticVerifierConfig()
        self.env = getattr(env, "unwrapped", env)
        if not isinstance(self.env, ReflectionEnv):
            raise ValueError(f"CriticVerifier needs the critic's ReflectionEnv; got {type(env).__name__}")
        self._problems: dict[str, Problem] | None = None
        self.tokens_generated = 0  # tokens the critic generated in all (see the class docstring)
        self.item_tokens: list[int] = []  # and for each item it scored, in order (pool_curves charges them)

    # ---------------------------------------------------------------- StepScorer
    def score_branches(self, branches) -> list[list[float]]:
        """Each branch's solution score from the critic, repeated on every step it took."""
        branches = list(branches)
        prompts = [self.prompt_of(b) for b in branches]
        answers = [self.answer_of(b) for b in branches]
        scores = self.score(prompts, answers)
        return [[score] * b.steps for score, b in zip(scores, branches)]

    def prompt_of(self, branch) -> str:
        """The task prompt of the branch's problem, as the reflection env writes it."""
        if self._problems is None:
            self._problems = {p.problem_id: p for p in map(self.env.get_problem, range(self.env.num_problems))}
        problem_id = branch.outcome.problem_id
        problem = self._problems.get(problem_id)
        if problem is None:
            raise ValueError(f"CriticVerifier: problem {problem_id!r} is not one of the critic env's problems "
                             f"(give the reflection env of the level and split searched)")
        return self.env.build_prompt(problem)

    @staticmethod
    def answer_of(branch) -> str:
        """The branch's solution text: its steps, one a line (as a single-turn answer writes them)."""
        steps = [a.text.strip("\n") for a in branch.actions] if branch.actions else [branch.text]
        return "\n".join(s for s in steps if s)[:MAX_ANSWER_CHARS]

    # ---------------------------------------------------------------- scores
    def score(self, prompts: Sequence[str], answers: Sequence[str]) -> list[float]:
        """The critic's approval score in [0, 1] of each (prompt, answer)."""
        if len(prompts) != len(answers):
            raise ValueError(f"CriticVerifier.score: {len(prompts)} prompts but {len(answers)} answers")
        out: list[float] = []
        size = self.config.batch_size
        for first in range(0, len(prompts), size):
            chunk = list(zip(prompts[first:first + size], answers[first:first + size]))
            out += self._verdict_scores(chunk) if self.config.mode == "verdict" else self._vote_scores(chunk)
        return out

    def context(self, prompt: str, answer: str, written: str = "") -> list[int]:
        """Token ids the critic sees at its turn after `answer`, then `written` (its own text so far)."""
        example = ReflectionTurnExample(prompt, (answer,), written, self.env.critic_request, self.env.refine_request,
                                        self.env.turn_role)
        ids, weights = turn_tokens(self.critic, example)
        eos = self.critic.tokenizer.eos_token_id
        if eos is not None and ids and ids[-1] == eos and weights[-1]:
            ids = ids[:-1]  # turn_tokens ends the target with end-of-sequence: the critic is still writing
        return ids

    def generate(self, contexts: list[list[int]], n: int, max_new_tokens: int, temperature: float
                 ) -> list[list[Generation]]:
        """`critic.sample` of `contexts`, its generated tokens added to `tokens_generated` and, a context's
        together, to `item_tokens`."""
        rows = self.critic.sample(contexts, n=n, max_new_tokens=max_new_tokens, temperature=temperature)
        own = [sum(len(g.completion_ids) for g in row) for row in rows]
        self.item_tokens += own
        self.tokens_generated += sum(own)
        return rows

    def _vote_scores(self, chunk: list[tuple[str, str]]) -> list[float]:
        c = self.config
        rows = self.generate([self.context(p, a) for p, a in chunk], n=c.votes, max_new_tokens=c.work_tokens,
                             temperature=c.temperature)
        return [sum(feedback_verdict(g.text) == APPROVE for g in row) / len(row) for row in rows]

    def _verdict_scores(self, chunk: list[tuple[str, str]]) -> list[float]:
        c = self.config
        words = list(c.approve_words) + list(c.reject_words)
        checks = self.generate([self.context(p, a) for p, a in chunk], n=1, max_new_tokens=c.work_tokens,
                               temperature=0.0)
        rows: list[tuple[list[int], list[int]]] = []  # (context, a verdict word's tokens): one per item and word
        for (prompt, answer), [check] in zip(chunk, checks):
            work = check.text[:verdict_start(check.text, words)].rstrip()
            context = self.context(prompt, answer, work)
            for word in words:
                rows.append((context, self.critic.encode_text((" " if work else "") + word)))
        logprobs = self.word_logprobs(rows)
        scores, per = [], len(words)
        for i in range(len(chunk)):
            own = logprobs[i * per:(i + 1) * per]
            top = max(own)
            mass = [math.exp(lp - top) for lp in own]
            scores.append(sum(mass[:len(c.approve_words)]) / sum(mass))
        return scores

    def word_logprobs(self, rows: list[tuple[list[int], list[int]]]) -> list[float]:
        """log P(word | context) of each (context, word tokens), teacher-forced in one batched pass: contexts
        padded on the left so every word starts at one column, words padded on the right (masked)."""
        longest, widest = max(len(c) for c, _ in rows), max(len(w) for _, w in rows)
        pad = self.critic.tokenizer.pad_token_id
        pad = pad if pad is not None else 0
        ids, mask = [], []
        for context, word in rows:
            lead, tail = longest - len(context), widest - len(word)
            ids.append([pad] * lead + context + word + [pad] * tail)
            mask.append([0] * lead + [1] * (len(context) + len(word)) + [0] * tail)
        device = getattr(self.critic, "device", "cpu")
        with torch.no_grad():
            logprobs, _ = self.critic.token_logprobs(torch.tensor(ids, device=device),
                                                     torch.tensor(mask, device=device), longest)
        logprobs = logprobs.float().cpu()
        return [float(logprobs[i, :len(word)].sum()) for i, (_, word) in enumerate(rows)]
