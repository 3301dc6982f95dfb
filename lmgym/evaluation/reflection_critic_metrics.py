"""What the critic said and what the actor did with it, over finished reflection episodes: the split of the
wrong->right and right->wrong transitions (lmgym.evaluation.reflection_metrics) into the critic's part and the
actor's part.

Each critic turn reads the actor's answer before it and is followed by the actor's next answer. Its verdict
is read back from its text (`feedback_verdict`: approve, reject or unclear; each phrase of
lmgym.traindata.oracle_feedback reads as the verdict it gives). Pooled over every critic turn of every episode:

- ``critic_false_alarm``: the critic rejected a right answer, out of the right answers it judged;
- ``critic_miss``: it approved a wrong answer, out of the wrong answers it judged;
- ``critic_unclear``: its verdict could not be read, out of all its turns;
- ``keep_after_approve``: the actor's next answer is the same (parsed) answer, after an approval;
- ``fix_after_reject``: the next answer is right, after a rejection of a wrong answer;
- ``break_after_alarm``: the next answer is wrong, after a rejection of a right answer (a false alarm);
- ``break_after_approve``: the next answer is wrong, after an approval of a right answer (the actor's own).

A rate whose denominator is empty is None, not 0.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lmgym.buffers import Trajectory

CRITIC_ROLE = "critic"
CRITIC_METRICS = ("critic_false_alarm", "critic_miss", "critic_unclear", "keep_after_approve", "fix_after_reject",
                  "break_after_alarm", "break_after_approve")

APPROVE, REJECT, UNCLEAR = "approve", "reject", "unclear"
# words that mark feedback as asking for a change; every STEP and GENERIC phrase has one, no CORRECT phrase does
_REJECT_MARKERS = re.compile(r"\b(wrong|mistake|should|not correct|incorrect|redo|recompute|again)\b", re.I)
_APPROVE_MARKERS = re.compile(r"\b(correct|right|keep)\b", re.I)
_MAX_FEEDBACK_CHARS = 4000  # model output is untrusted: only the first 4,000 characters are read


def feedback_verdict(text: str) -> str:
    """What a critic's feedback (in the oracle's language) asks for: REJECT when it marks a mistake or asks
    for a redo, else APPROVE when it says correct / right / keep, else UNCLEAR. A critic trained on the oracle
    writes one of its phrases, so this reads its verdict back; free text that mixes both counts as REJECT."""
    head = text[:_MAX_FEEDBACK_CHARS]
    if _REJECT_MARKERS.search(head):
        return REJECT
    return APPROVE if _APPROVE_MARKERS.search(head) else UNCLEAR


def critic_turns(episode: Trajectory) -> list[tuple[bool, str, bool, bool]]:
    """(answer right, critic verdict, next answer right, next answer the same) for each critic turn of an
    episode that an actor answer follows."""
    outcome = episode.outcome
    critics = [a.text for a in outcome.actions if a.role == CRITIC_ROLE]
    correct, answers = list(outcome.turn_correct), list(outcome.turn_answers or [None] * len(outcome.turn_correct))
    return _paired(correct, answers, [feedback_verdict(text) for text in critics[:max(len(correct) - 1, 0)]])


def record_critic_turns(record: Mapping[str, Any]) -> list[tuple[bool, str, bool, bool]]:
    """`critic_turns` from an episode's problem record (lmgym.evaluation.reflection_metrics.reflection_records:
    its `turn_correct`, `turn_answers` and `critic_verdicts`)."""
    return _paired(list(record["turn_correct"]), list(record["turn_answers"]), list(record["critic_verdicts"]))


def _paired(correct: list[bool], answers: list[str | None], verdicts: list[str]) -> list[tuple[bool, str, bool, bool]]:
    return [(correct[i], verdict, correct[i + 1], answers[i] is not None and answers[i + 1] == answers[i])
            for i, verdict in enumerate(verdicts[:max(len(correct) - 1, 0)])]


def critic_metrics(episodes: Iterable[Trajectory]) -> dict[str, float | None]:
    """The rates of the module docstring, pooled over the critic turns of `episodes` (ReflectionEnv
    Trajectories, whose outcome records the actions)."""
    return critic_rates([turn for episode in episodes for turn in critic_turns(episode)])


def critic_rates(turns: Sequence[tuple[bool, str, bool, bool]]) -> dict[str, float | None]:
    """The rates of the module docstring from critic turns (`critic_turns`, `record_critic_turns`), pooled."""
    if not turns:
        raise ValueError("critic_metrics: no critic turn followed by an actor answer (are these ReflectionEnv "
                         "episodes of 2 or more actor turns?)")

    def rate(hits: list[bool]) -> float | None:
        return sum(hits) / len(hits) if hits else None

    return {
        "critic_false_alarm": rate([v == REJECT for right, v, _, _ in turns if right]),
        "critic_miss": rate([v == APPROVE for right, v, _, _ in turns if not right]),
        "critic_unclear": rate([v == UNCLEAR for _, v, _, _ in turns]),
        "keep_after_approve": rate([same for _, v, _, same in turns if v == APPROVE]),
        "fix_after_reject": rate([after for right, v, after, _ in turns if v == REJECT and not right]),
        "break_after_alarm": rate([not after for right, v, after, _ in turns if v == REJECT and right]),
        "break_after_approve": rate([not after for right, v, after, _ in turns if v == APPROVE and right]),
    }
