"""Pairs for both reflection roles from episodes that share a context: branched scripted episodes (actor:
right refinement over wrong under one feedback; critic: feedback whose refinements were right more often),
ties giving no pair, and degenerate pairs dropped and counted by reason."""
import pytest

from lmgym.envs import ReflectionEnv
from lmgym.episodes import SamplingSettings
from lmgym.traindata.preference_data import PreferencePair
from lmgym.traindata.reflection_branching import branched_reflection_episodes
from lmgym.traindata.reflection_context_pairs import context_pairs
from tests.test_reflection import CRITIC_TEXT, REFINE, REFINE_TEXT, FixedTask, ScriptedRole

QUESTION = "Q0? Give the final answer after ####."
FEEDBACK = ["Redo the sum.", "Looks right.", "Check it."]
REFINED = {"Redo the sum.": ["#### 2", "So #### 2"],  # both right (gold 2): an actor tie
           "Looks right.": ["#### 9", "It is #### 9"],  # both wrong: an actor tie
           "Check it.": ["#### 2", "#### 5"]}  # one right, one wrong: the actor's pair


def branched_players(tiny_policy):
    made = dict.fromkeys(FEEDBACK, 0)

    def actor(seen, k):
        if REFINE not in seen:
            return "#### 9"
        feedback = next(f for f in FEEDBACK if f in seen)
        made[feedback] += 1
        return REFINED[feedback][made[feedback] - 1]

    return {"actor": ScriptedRole(tiny_policy, actor), "critic": ScriptedRole(tiny_policy, lambda seen, k: FEEDBACK[k])}


def test_branched_episodes_share_their_contexts(tiny_policy):
    env = ReflectionEnv(FixedTask(), max_turns=3)
    players = branched_players(tiny_policy)
    leaves = branched_reflection_episodes(players, env, [0], feedbacks=3, refinements=2, settings=SamplingSettings())
    assert len(leaves) == 6 and len(players["actor"].seen) == 7 and len(players["critic"].seen) == 3
    assert [e.info["steps"][1] for e in leaves] == [f for f in FEEDBACK for _ in range(2)]
    assert [e.info["turn_correct"] for e in leaves] == [[False, True]] * 2 + [[False, False]] * 2 + [
        [False, True], [False, False]]
    assert all(e.info["unfinished"] for e in leaves)  # max_turns 3: a third answer would follow
    with pytest.raises(ValueError, match="max_turns=1; a refinement needs >= 2"):
        branched_reflection_episodes(players, ReflectionEnv(FixedTask(), max_turns=1), [0])
    with pytest.raises(ValueError, match="feedbacks must be an int >= 1; got 0"):
        branched_reflection_episodes(players, env, [0], feedbacks=0)


def test_pairs_for_both_roles_from_branched_episodes(tiny_policy):
    env = ReflectionEnv(FixedTask(), max_turns=2)
    players = branched_players(tiny_policy)
    found = context_pairs(branched_reflection_episodes(players, env, [0], feedbacks=3, refinements=2,
                                                       settings=SamplingSettings()), env)
    critic_prompt = QUESTION + "#### 9" + CRITIC_TEXT
    assert players["critic"].seen == [critic_prompt] * 3  # the prompt is the text the critic saw
    # actor: only "Check it." has a right and a wrong refinement; the other two feedbacks are ties
    assert found.actor == [PreferencePair(critic_prompt + "Check it." + REFINE_TEXT, "#### 2", "#### 5")]
    assert players["actor"].seen[-1] == critic_prompt + "Check it." + REFINE_TEXT
    # critic: scores Redo 2/2, Looks 0/2, Check 1/2 -> every higher-scored feedback over every lower one
    assert found.critic == [PreferencePair(critic_prompt, "Redo the sum.", "Looks right."),
                            PreferencePair(critic_prompt, "Redo the sum.", "Check it."),
                            PreferencePair(critic_prompt, "Check it.", "Looks right.")]
    assert found.counts() == {"actor_pairs": 1, "actor_ties": 2, "actor_dropped_empty": 0,
                              "actor_dropped_identical": 0, "actor_dropped_unparseable": 0,
                              "critic_pairs": 3, "critic_ties": 0, "critic_dropped_empty": 0,
                              "critic_dropped_identical": 0, "critic_dropped_unparseable": 0}
    assert found.samples(1) == {"actor": found.actor, "critic": found.critic[:1]}
    capped = context_pairs(branched_reflection_episodes(branched_players(tiny_policy), env, [0], feedbacks=3,
                                                        refinements=2, settings=SamplingSettings()), env,
                           max_pairs_per_context=1)
    assert capped.critic == found.critic[:1]


def episode(feedback, refined, refined_correct, refined_answer, initial="#### 4"):
    """A one-round episode's info on question "Q" (gold 5): the first answer 4 is wrong."""
    return {"prompt": "Q", "steps": [initial, feedback, refined], "turn_correct": [False, refined_correct],
            "turn_answers": ["4", refined_answer]}


def test_ties_give_no_pair_for_either_role():
    env = ReflectionEnv(FixedTask(), max_turns=2)
    all_right = [episode("A.", "#### 5", True, "5"), episode("B.", "So #### 5", True, "5")]
    all_wrong = [episode("A.", "#### 6", False, "6"), episode("A.", "#### 7", False, "7"),
                 episode("B.", "#### 8", False, "8")]
    for episodes, actor_ties in ((all_right, 0), (all_wrong, 1)):  # all right: one refinement per feedback
        found = context_pairs(episodes, env)
        assert (found.actor, found.critic) == ([], [])
        assert found.ties == {"actor": actor_ties, "critic": 1}


def test_degenerate_pairs_are_dropped_and_counted_by_reason():
    env = ReflectionEnv(FixedTask(), max_turns=2)
    fix = "Fix the carry."
    episodes = [episode(fix, "#### 5", True, "5"),
                episode(fix, "", False, None),  # empty
                episode(fix, "#### 5\n", False, "5"),  # identical up to whitespace
                episode(fix, "I give up.", False, None),  # unparseable
                episode(fix, "#### 6", False, "6"),  # kept
                episode("", "#### 6", False, "6"),  # empty feedback
                episode("Fix  the carry. ", "#### 7", False, "7"),  # identical up to whitespace
                episode("Try again.", "so what", False, None),  # its refinement unparseable
                episode("Look at the units digit.", "#### 8", False, "8")]  # kept
    critic_prompt = "Q#### 4" + CRITIC_TEXT
    found = context_pairs(episodes, env)
    assert found.actor == [PreferencePair(critic_prompt + fix + REFINE_TEXT, "#### 5", "#### 6")]
    assert found.critic == [PreferencePair(critic_prompt, fix, "Look at the units digit.")]
    assert found.dropped == {"actor": {"empty": 1, "identical": 1, "unparseable": 1},
                             "critic": {"empty": 1, "identical": 1, "unparseable": 1}}
    kept = context_pairs(episodes, env, drop_unparsed=False)
    assert [p.rejected for p in kept.actor] == ["I give up.", "#### 6"]
    assert [p.rejected for p in kept.critic] == ["Try again.", "Look at the units digit."]
    assert kept.dropped["actor"]["unparseable"] == kept.dropped["critic"]["unparseable"] == 0


def test_bad_input_is_one_line():
    env = ReflectionEnv(FixedTask(), max_turns=2)
    with pytest.raises(ValueError, match="^episode 0: not a ReflectionEnv episode"):
        context_pairs([{"correct": True}], env)
    with pytest.raises(ValueError, match="needs the ReflectionEnv that played the episodes; got FixedTask"):
        context_pairs([], FixedTask())
    with pytest.raises(ValueError, match="max_pairs_per_context must be None or an int >= 1; got 0"):
        context_pairs([], env, max_pairs_per_context=0)
