"""Preference pairs for the reflection roles, without new inference: from recorded (question, initial answer,
feedback, refined answer, gold) triples, or from finished ``ReflectionEnv`` episodes (each refinement round
is one such record, graded as the env graded it).

- Actor: where exactly one of the two answers is correct, the correct one is chosen and the other rejected.
  The prompt is the question (``actor_context="question"``) or the refinement prompt the actor saw:
  question, initial answer, critic request, feedback, refine request (``actor_context="feedback"``).
- Critic: among records with the same critic prompt (question, initial answer, critic request), feedback
  whose refinement is correct is chosen over feedback whose refinement is not.

Prompts are raw-text transcripts (``lmgym.envs.reflection.reflection_transcript``): a chat-mode episode's turns
are flattened into that text. Pairs are returned per role, without repeats, in the records' order.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmgym.buffers import EpisodeOutcome, Trajectory
from lmgym.core.jsonl import existing_file, parse_jsonl
from lmgym.envs.answers import answers_equal
from lmgym.envs.extraction import extract_answer
from lmgym.envs.reflection import (
    ACTOR,
    CRITIC,
    DEFAULT_CRITIC_REQUEST,
    REFINE_LEAD,
    ReflectionEnv,
    reflection_transcript,
)
from lmgym.traindata.preference_data import PreferencePair

ACTOR_CONTEXTS = ("question", "feedback")
Grader = Callable[[str, str], bool]


@dataclass(frozen=True)
class ReflectionTriple:
    """One recorded refinement: the actor's prompt (``question``), its first answer, the critic's feedback on
    it, the refined answer written after the feedback, and the gold answer."""

    question: str
    initial: str
    refined: str
    gold: str
    feedback: str = ""


@dataclass(frozen=True)
class Round:
    """One refinement round, graded: ``before`` is the transcript the initial answer followed; the parsed
    answers are the env's (None: unparsed, or not recorded, as in triples)."""

    question: str
    before: str
    initial: str
    feedback: str
    refined: str
    initial_correct: bool
    refined_correct: bool
    initial_answer: str | None = None
    refined_answer: str | None = None


def math_grade(solution: str, gold: str) -> bool:
    """The math envs' verdict: the extracted final answer of ``solution`` equals ``gold``."""
    answer = extract_answer(solution)
    return answer is not None and answers_equal(answer, gold)


def triple_from_record(row: object) -> ReflectionTriple:
    """A ReflectionTriple from one JSON object (see `load_triples`); a bad one is a one-line ValueError."""
    if not isinstance(row, dict):
        raise ValueError(f"expected an object, got {type(row).__name__}")
    fields = {name: row.get(name, "" if name == "feedback" else None)
              for name in ("question", "initial", "refined", "gold", "feedback")}
    if isinstance(fields["gold"], (int, float)) and not isinstance(fields["gold"], bool):
        fields["gold"] = str(fields["gold"])  # a number written as one
    bad = [name for name, value in fields.items() if not isinstance(value, str)]
    if bad:
        raise ValueError(f"field {bad[0]!r} must be a str")
    return ReflectionTriple(**fields)


def load_triples(path: str | Path) -> list[ReflectionTriple]:
    """ReflectionTriples from a JSONL file: one object a line with str fields "question", "initial", "refined",
    "gold" (or a number) and optionally "feedback" (others ignored); blank lines skipped; errors name the file
    and line."""
    path = existing_file(path, "reflection triples")
    return parse_jsonl(path, triple_from_record, what="reflection triples")


def pairs_from_triples(triples: Iterable[ReflectionTriple], *, actor_context: str = "question",
                       env: ReflectionEnv | None = None, grade: Grader = math_grade) -> dict[str, list[PreferencePair]]:
    """{"actor": pairs, "critic": pairs} from recorded triples, each answer graded with ``grade(text, gold)``.
    The requests in prompts are ``env``'s (default: ``DEFAULT_CRITIC_REQUEST`` and ``REFINE_LEAD``)."""
    rounds = []
    for number, triple in enumerate(triples):
        if not isinstance(triple, ReflectionTriple):
            raise ValueError(f"triple {number}: expected a ReflectionTriple; got {type(triple).__name__}")
        for name in ("question", "initial", "refined", "gold", "feedback"):
            if not isinstance(getattr(triple, name), str):
                raise ValueError(f"triple {number}: {name} must be a str; got {type(getattr(triple, name)).__name__}")
        rounds.append(Round(triple.question, triple.question, triple.initial, triple.feedback, triple.refined,
                             bool(grade(triple.initial, triple.gold)), bool(grade(triple.refined, triple.gold))))
    return _pairs(rounds, actor_context, *_requests(env))


def pairs_from_episodes(episodes: Iterable[Trajectory | Mapping[str, Any]], env: ReflectionEnv, *,
                        actor_context: str = "question") -> dict[str, list[PreferencePair]]:
    """{"actor": pairs, "critic": pairs} from finished episodes of ``env`` (Trajectories or their info): every
    refinement round of an episode is a record, graded by the env's recorded ``turn_correct``."""
    if not isinstance(getattr(env, "unwrapped", env), ReflectionEnv):
        raise ValueError(f"pairs_from_episodes needs the ReflectionEnv that played them; got {type(env).__name__}")
    requests = _requests(getattr(env, "unwrapped", env))
    rounds = [r for number, episode in enumerate(episodes) for r in episode_rounds(number, episode, *requests)]
    return _pairs(rounds, actor_context, *requests)


def episode_rounds(number: int, episode: Trajectory | Mapping[str, Any], critic_request: str,
                   refine_request: str) -> list[Round]:
    """The refinement rounds of episode number ``number`` (a Trajectory or its info), graded as the env graded
    them; a record that is not a ReflectionEnv episode is a one-line ValueError naming ``number``."""
    info = episode.info if isinstance(episode, Trajectory) else episode
    if not isinstance(info, Mapping):
        raise ValueError(f"episode {number}: expected a Trajectory or its info; got {type(info).__name__}")
    outcome = episode.outcome if isinstance(episode, Trajectory) else EpisodeOutcome.from_info(info)
    steps, correct, prompt = info.get("steps"), list(outcome.turn_correct), info.get("prompt")
    answers = list(outcome.turn_answers or [None] * len(correct))
    if not isinstance(steps, list) or not correct or not isinstance(prompt, str):
        raise ValueError(f"episode {number}: not a ReflectionEnv episode (info needs steps, turn_correct, prompt)")
    if len(steps) < 2 * len(correct) - 1:
        raise ValueError(f"episode {number}: {len(correct)} graded answers but only {len(steps)} actions")
    rounds = []
    for k in range(len(correct) - 1):  # round k: answer 2k, feedback 2k + 1, refined answer 2k + 2
        before = reflection_transcript(prompt, steps[:2 * k], critic_request, refine_request)
        rounds.append(Round(prompt, before, steps[2 * k], steps[2 * k + 1], steps[2 * k + 2],
                            bool(correct[k]), bool(correct[k + 1]), answers[k], answers[k + 1]))
    return rounds


def _pairs(rounds: Sequence[Round], actor_context: str, critic_request: str,
           refine_request: str) -> dict[str, list[PreferencePair]]:
    if actor_context not in ACTOR_CONTEXTS:
        raise ValueError(f"actor_context must be one of {ACTOR_CONTEXTS}; got {actor_context!r}")
    actor, critic_groups = [], {}
    for r in rounds:
        critic_prompt = reflection_transcript(r.before, [r.initial], critic_request, refine_request)
        critic_groups.setdefault(critic_prompt, []).append(r)
        if r.initial_correct == r.refined_correct:
            continue
        prompt = r.question if actor_context == "question" else reflection_transcript(
            r.before, [r.initial, r.feedback], critic_request, refine_request)
        chosen, rejected = (r.refined, r.initial) if r.refined_correct else (r.initial, r.refined)
        actor.append(PreferencePair(prompt, chosen, rejected))
    critic = [PreferencePair(prompt, good.feedback, bad.feedback)
              for prompt, group in critic_groups.items()
              for good in group if good.refined_correct
              for bad in group if not bad.refined_correct and bad.feedback != good.feedback]
    return {ACTOR: _unique(actor), CRITIC: _unique(critic)}


def _requests(env: ReflectionEnv | None) -> tuple[str, str]:
    if env is None:
        return DEFAULT_CRITIC_REQUEST, REFINE_LEAD
    return env.critic_request, env.refine_request


def _unique(pairs: list[PreferencePair]) -> list[PreferencePair]:
    seen, kept = set(), []
    for pair in pairs:
        key = (pair.prompt, pair.chosen, pair.rejected)
        if key not in seen:
            seen.add(key)
            kept.append(pair)
    return kept
