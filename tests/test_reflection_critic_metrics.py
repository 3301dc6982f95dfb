"""The critic's verdict read back from its text, and the split of the turn transitions into the critic's part
(false alarms, misses) and the actor's (keeping, fixing, breaking), against hand counts of scripted roles."""
import re

import pytest

from lmgym.envs import ReflectionEnv
from lmgym.envs.reflection import DEFAULT_CRITIC_REQUEST
from lmgym.evaluation.reflection_critic_metrics import critic_metrics
from lmgym.evaluation.reflection_metrics import evaluate_reflection, reflection_episodes
from lmgym.traindata.oracle_feedback import (
    APPROVE,
    CORRECT_PHRASES,
    GENERIC_PHRASES,
    REJECT,
    STEP_PHRASES,
    UNCLEAR,
    feedback_verdict,
)
from tests.test_reflection import REFINE, FixedTask, ScriptedRole


def test_every_oracle_phrase_reads_back_as_its_verdict():
    for phrase in CORRECT_PHRASES:
        assert feedback_verdict(phrase) == APPROVE, phrase
    for phrase in STEP_PHRASES:
        text = phrase.format(step=2, quote="5 + 9 = 14", got=14, expected=12)
        assert feedback_verdict(text) == REJECT, text
    for phrase in GENERIC_PHRASES:
        assert feedback_verdict(phrase) == REJECT, phrase
    assert feedback_verdict("The answer is 7.") == UNCLEAR
    assert feedback_verdict("Correct so far, but step 3 should be 12.") == REJECT  # mixed: a change is asked
    assert feedback_verdict("x" * 5000 + " wrong") == UNCLEAR  # only the first 4,000 characters are read


# The critic of each problem, per critic turn (hand-made; gold 2, 3, 7; the actor first answers 2 everywhere):
# Q0 (right): a false alarm ("should be 5"), then it approves the wrong 5 (a miss);
# Q1 (wrong): a rejection that fixes it ("should be 3"), then it approves the right 3;
# Q2 (wrong): text with no verdict, then a rejection that does not fix it ("should be 6").
CRITIC_SCRIPT = {
    "Q0?": ['Step 1 is wrong: "2" gives 2, but it should be 5. Redo the solution from step 1.', CORRECT_PHRASES[0]],
    "Q1?": ['Check step 1: "2" should give 3 instead of 2. Start again from that step.', CORRECT_PHRASES[2]],
    "Q2?": ["Hmm.",
            "The first mistake is in step 1 (\"2\"): the result should be 6, not 2. Recompute from step 1 onward."],
}


def critic(seen, calls):
    question = next(q for q in CRITIC_SCRIPT if q in seen)
    return CRITIC_SCRIPT[question][seen.count(DEFAULT_CRITIC_REQUEST) - 1]


def actor(seen, calls):
    """First answer 2; a refinement takes the value the feedback says it should be, else repeats itself."""
    if REFINE not in seen:
        return "#### 2"
    feedback = seen.split(DEFAULT_CRITIC_REQUEST)[-1]
    wanted = re.findall(r"should (?:be|give) (\d+)", feedback)
    return "#### " + (wanted[0] if wanted else re.findall(r"#### (\d+)", seen)[-1])


def test_critic_and_actor_rates_against_hand_counts(tiny_policy):
    players = {"actor": ScriptedRole(tiny_policy, actor), "critic": ScriptedRole(tiny_policy, critic)}
    env = ReflectionEnv(FixedTask(), max_turns=3)
    episodes = reflection_episodes(players, env, episodes=3)
    assert [list(e.outcome.turn_answers) for e in episodes] == [["2", "5", "5"], ["2", "3", "3"], ["2", "2", "6"]]
    # the six critic turns: (answer right, verdict, next right, next the same)
    # Q0: (T, reject, F, F), (F, approve, F, T); Q1: (F, reject, T, F), (T, approve, T, T);
    # Q2: (F, unclear, F, T), (F, reject, F, F)
    assert critic_metrics(episodes) == {
        "critic_false_alarm": 0.5,        # of the 2 right answers judged, 1 rejected (Q0 turn 1)
        "critic_miss": 0.25,              # of the 4 wrong ones, 1 approved (Q0 turn 2)
        "critic_unclear": pytest.approx(1 / 6),
        "keep_after_approve": 1.0,        # both approvals kept (Q0 turn 2, Q1 turn 2)
        "fix_after_reject": 0.5,          # Q1 turn 1 fixed, Q2 turn 2 not
        "break_after_alarm": 1.0,         # the false alarm broke Q0
        "break_after_approve": 0.0,       # the approved right answer stayed right
    }
    result = evaluate_reflection(players, env, episodes=3, turns=3)
    assert result["critic_false_alarm"] == 0.5 and result["fix_after_reject"] == 0.5  # in the evaluation too


def test_rates_with_no_denominator_are_none_and_no_critic_turn_is_one_line(tiny_policy):
    players = {"actor": ScriptedRole(tiny_policy, lambda seen, k: "#### 2"),
               "critic": ScriptedRole(tiny_policy, lambda seen, k: CORRECT_PHRASES[1])}
    episodes = reflection_episodes(players, ReflectionEnv(FixedTask(), max_turns=2), episodes=1)  # Q0: right
    found = critic_metrics(episodes)
    assert found["critic_false_alarm"] == 0.0 and found["keep_after_approve"] == 1.0
    assert found["critic_miss"] is None and found["fix_after_reject"] is None and found["break_after_alarm"] is None
    one_turn = reflection_episodes(players, ReflectionEnv(FixedTask(), max_turns=1), episodes=1)
    with pytest.raises(ValueError, match="critic_metrics: no critic turn followed by an actor answer"):
        critic_metrics(one_turn)
