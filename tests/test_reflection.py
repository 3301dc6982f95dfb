"""The reflection env's turn structure (scripted roles), the reflection metrics against hand values, and
preference pairs from recorded triples and from the env's own episodes."""
import pytest
from gymnasium.utils.env_checker import check_env

from lmgym.envs import MathEnv, Problem, ReflectionEnv, make, registered_ids
from lmgym.envs.reflection import DEFAULT_CRITIC_REQUEST, REFINE_LEAD, improvement_reward
from lmgym.episodes import SamplingSettings, rollout
from lmgym.evaluation.reflection_metrics import (
    evaluate_reflection,
    reflection_episodes,
    reflection_metrics,
)
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding.generation import Generation
from lmgym.traindata.preference_data import PreferencePair
from lmgym.traindata.reflection_pairs import (
    ReflectionTriple,
    pairs_from_episodes,
    pairs_from_triples,
)

CRITIC_TEXT = f"\n\n{DEFAULT_CRITIC_REQUEST}\n"
REFINE = "Use the feedback to write a corrected solution. Give the final answer after ####."
REFINE_TEXT = f"\n\n{REFINE}\n"


class FixedTask(MathEnv):
    """Three problems with known golds 2, 3 and 7 (prompt: the question alone)."""

    GOLDS = ("2", "3", "7")

    def __init__(self, **kwargs):
        super().__init__(instruction=" Give the final answer after ####.", **kwargs)

    @property
    def num_problems(self) -> int:
        return len(self.GOLDS)

    def get_problem(self, index: int) -> Problem:
        return Problem(f"Q{index}?", self.GOLDS[index], f"fixed/{index}")


class ScriptedRole:
    """A role that plays `script(seen_text, calls_so_far)`; records the text each call saw (prompt and
    transcript so far, decoded). Tokens via the tiny tokenizer; raw prompts unless `chat`."""

    def __init__(self, policy, script, chat=False):
        self.policy, self.script, self.chat, self.seen = policy, script, chat, []
        self.tokenizer, self.use_chat_template, self.device = policy.tokenizer, chat, "cpu"

    def format_prompt(self, observation):
        return self.policy.format_prompt(observation) if self.chat else self.policy.encode_text(observation)

    def encode_text(self, text):
        return self.policy.encode_text(text)

    def encode_turn(self, text, role, after=()):
        return self.policy.encode_turn(text, role, after)

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        out = []
        for ids in prompts:
            seen = self.tokenizer.decode(ids)
            text = self.script(seen, len(self.seen))
            self.seen.append(seen)
            completion = self.encode_text(text)
            out.append([Generation(list(ids), completion, [-1.0] * len(completion), text, "stop")])
        return out


def roles(tiny_policy, actor_answers, feedback, chat=False):
    """{"actor", "critic"}: the actor plays `actor_answers` in turn, the critic `feedback` in turn."""
    return {"actor": ScriptedRole(tiny_policy, lambda seen, k: actor_answers[k % len(actor_answers)], chat),
            "critic": ScriptedRole(tiny_policy, lambda seen, k: feedback[k % len(feedback)], chat)}


# ---- the env -------------------------------------------------------------------------------------------


def test_turns_alternate_and_each_role_sees_the_transcript_so_far(tiny_policy):
    env = ReflectionEnv(FixedTask(), max_turns=3)
    players = roles(tiny_policy, ["So #### 5", "Redo: #### 2", "Sure #### 2"], ["Wrong sum.", "Fine."])
    (traj,) = rollout(env, players, [{"options": {"index": 0}}], 1, SamplingSettings(max_new_tokens=32))
    actor, critic = players["actor"].seen, players["critic"].seen
    assert (len(actor), len(critic)) == (3, 2)  # max_turns answers, one critique between each two
    prompt = "Q0? Give the final answer after ####."
    assert actor[0] == prompt
    assert critic[0] == prompt + "So #### 5" + CRITIC_TEXT
    assert actor[1] == critic[0] + "Wrong sum." + REFINE_TEXT
    assert critic[1] == actor[1] + "Redo: #### 2" + CRITIC_TEXT
    assert actor[2] == critic[1] + "Fine." + REFINE_TEXT
    assert traj.text == actor[2][len(prompt):] + "Sure #### 2"  # nothing after the final answer
    assert traj.info["turn_answers"] == ["5", "2", "2"] and traj.info["turn_correct"] == [False, True, True]
    assert traj.info["steps"] == ["So #### 5", "Wrong sum.", "Redo: #### 2", "Fine.", "Sure #### 2"]
    assert (traj.info["parsed_answer"], traj.info["correct"], traj.reward) == ("2", True, 1.0)
    outcome = traj.outcome  # the same facts, typed, with the engine's record of each action
    assert (outcome.turn_answers, outcome.turn_correct) == (("5", "2", "2"), (False, True, True))
    assert (outcome.parsed_answer, outcome.correct) == ("2", True)
    assert [(a.role, a.text) for a in outcome.actions] == list(zip(["actor", "critic"] * 2 + ["actor"],
                                                                   traj.info["steps"]))
    assert [a.injected_text for a in outcome.actions] == [CRITIC_TEXT, REFINE_TEXT] * 2 + [""]
    assert {a.injected_role for a in outcome.actions} == {None}
    assert not traj.truncated and traj.step_rewards == [0.0, 0.0, 0.0, 0.0, 1.0]
    assert env.transcript(prompt, traj.info["steps"]) == actor[2] + "Sure #### 2"
    acted = {r for r, m in zip(traj.roles, traj.completion_mask) if m}
    assert acted == {"actor", "critic"}


def test_the_final_answer_decides_the_reward_and_improvement_is_a_reward_option(tiny_policy):
    env = ReflectionEnv(FixedTask(), max_turns=2, reward_fns={"improvement": improvement_reward})
    players = roles(tiny_policy, ["#### 2", "#### 9"], ["Check it."])
    (traj,) = rollout(env, players, [{"options": {"index": 0}}], 1, SamplingSettings())
    assert traj.info["turn_correct"] == [True, False] and traj.info["correct"] is False
    assert traj.reward == -1.0  # correct first, wrong after the critique
    one = ReflectionEnv(FixedTask(), max_turns=1)
    solo = roles(tiny_policy, ["#### 2"], ["never asked"])
    (traj,) = rollout(one, solo, [{"options": {"index": 0}}], 1, SamplingSettings())
    assert traj.info["turn_correct"] == [True] and traj.reward == 1.0 and solo["critic"].seen == []


def test_chat_mode_writes_the_requests_as_user_turns(tiny_policy):
    env = ReflectionEnv(FixedTask(), max_turns=2, turn_role="user")
    players = roles(tiny_policy, ["#### 5", "#### 2"], ["Wrong."], chat=True)
    (traj,) = rollout(env, players, [{"options": {"index": 1}}], 1, SamplingSettings())
    critic_view = players["critic"].seen[0]
    assert critic_view.endswith(f"#### 5<|im_end|>\n<|im_start|>user\n{DEFAULT_CRITIC_REQUEST}<|im_end|>\n"
                                f"<|im_start|>assistant\n")
    assert players["actor"].seen[1] == critic_view + f"Wrong.<|im_end|>\n<|im_start|>user\n{REFINE}<|im_end|>\n" \
                                                     f"<|im_start|>assistant\n"
    assert traj.info["turn_answers"] == ["5", "2"] and traj.info["turn_correct"] == [False, False]
    assert [(a.injected_text, a.injected_role) for a in traj.outcome.actions] == [
        (DEFAULT_CRITIC_REQUEST, "user"), (REFINE, "user"), ("", None)]


def test_a_restored_state_restores_the_turn_records():
    env = ReflectionEnv(FixedTask(), max_turns=3)
    env.reset(options={"index": 0})
    env.step("#### 2")
    state = env.get_state()
    env.step("bad")
    env.step("#### 4")
    env.set_state(state)
    assert (env.turn_answers, env.turn_correct, env.current_role) == (["2"], [True], "critic")
    info = env.step("ok")[4]
    assert info["turn_answers"] == ["2"] and env.current_role == "actor"


def test_registered_ids_build_and_pass_the_gymnasium_checker(shared_data):
    assert {"Reflection-MATH-v0", "Reflection-GSM8K-v0", "Reflection-Arithmetic-v0"} <= set(registered_ids())
    env = make("Reflection-Arithmetic-v0", max_turns=2)
    check_env(env)
    assert (env.task.level, env.max_steps, env.refine_request) == (2, 3, REFINE)
    math = make("Reflection-MATH-v0", data_path=str(shared_data / "math500"), subset=(0, 3))
    observation, info = math.reset(options={"index": 0})
    assert math.num_problems == 3 and observation.startswith(info["question"]) and math.max_turns == 5
    assert math.refine_request.endswith("put the final answer in \\boxed{}.")


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match="'max_steps' is not a task keyword argument \\(set max_turns instead\\)"):
        make("Reflection-Arithmetic-v0", max_steps=4)
    with pytest.raises(ValueError, match="'level' is for a task given as an env id"):
        ReflectionEnv(FixedTask(), level=3)
    with pytest.raises(ValueError, match="max_turns"):
        ReflectionEnv(FixedTask(), max_turns=0)


# ---- metrics -------------------------------------------------------------------------------------------

EPISODES = [  # (answers, verdicts) of five actor turns
    {"turn_answers": ["3", "5", "5", "5", "5"], "turn_correct": [False, True, True, True, True]},
    {"turn_answers": ["5", "3", "3", "4", "5"], "turn_correct": [True, False, False, False, True]},
    {"turn_answers": [None, "2", "2", None, "7"], "turn_correct": [False] * 5},
    {"turn_answers": ["1", "1", "9", "9", "9"], "turn_correct": [True, True, False, False, False]},
]


def test_the_three_metrics_against_hand_values():
    # m1@t5: 5 (4 votes), 5 (tie 5:3 two each, 5 seen first), 2, 9 -> right, right, wrong, wrong
    assert reflection_metrics(EPISODES) == {"p1@t1": 0.5, "m1@t5": 0.5, "p1@t5": 0.75, "final_accuracy": 0.5,
                                            "episodes": 4.0}
    # first three turns: majorities 5, 3, 2, 1 -> right, wrong, wrong, right
    three = reflection_metrics(EPISODES, turns=3)
    assert (three["m1@t3"], three["p1@t3"]) == (0.5, 0.75)
    assert reflection_metrics(EPISODES[1:2], turns=3)["m1@t3"] == 0.0
    with pytest.raises(ValueError, match="ReflectionEnv episodes: info"):
        reflection_metrics([{"correct": True}])


def test_evaluate_reflection_on_scripted_roles(tiny_policy):
    env = ReflectionEnv(FixedTask(), max_turns=5)
    players = {"actor": ScriptedRole(tiny_policy, lambda seen, k: "#### 3" if REFINE in seen else "#### 2"),
               "critic": ScriptedRole(tiny_policy, lambda seen, k: "Hmm.")}
    result = evaluate_reflection(players, env, episodes=3, batch_prompts=2)
    # golds 2, 3, 7: verdicts [T,F,F,F,F], [F,T,T,T,T], all F; majority 3 each time
    assert result["p1@t1"] == pytest.approx(1 / 3) and result["m1@t5"] == pytest.approx(1 / 3)
    assert result["p1@t5"] == pytest.approx(2 / 3) and result["final_accuracy"] == pytest.approx(1 / 3)
    assert result["episodes"] == 3.0 and len(players["actor"].seen) == 15 and len(players["critic"].seen) == 12
    with pytest.raises(ValueError, match="turns=5 but the env runs max_turns=2"):
        evaluate_reflection(players, ReflectionEnv(FixedTask(), max_turns=2), episodes=1)


def test_two_models_play_the_two_roles():
    tok = build_tiny_tokenizer()
    players = {"actor": HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu"),
               "critic": HFPolicy(build_tiny_model(tok, seed=1), tok, device="cpu")}
    env = ReflectionEnv(FixedTask(), max_turns=2, critic_request="Review.", refine_request="Fix.")
    (traj,) = reflection_episodes(players, env, episodes=1, max_new_tokens=3)
    acted = [r for r, m in zip(traj.roles, traj.completion_mask) if m]
    assert acted == ["actor"] * 3 + ["critic"] * 3 + ["actor"] * 3
    assert len(traj.info["turn_correct"]) == 2 and len(traj.info["steps"]) == 3


# ---- preference pairs ----------------------------------------------------------------------------------

TRIPLES = [
    ReflectionTriple("Q1", "#### 4", "#### 5", gold="5", feedback="Check the sum."),
    ReflectionTriple("Q1", "#### 4", "So #### 4", gold="5", feedback="Looks fine."),
    ReflectionTriple("Q2", "#### 7", "#### 8", gold="7", feedback="Off by one?"),
    ReflectionTriple("Q2", "#### 7", "It is #### 7", gold="7", feedback="Right."),
]


def test_pairs_from_triples_against_hand_values():
    pairs = pairs_from_triples(TRIPLES)
    assert pairs["actor"] == [PreferencePair("Q1", "#### 5", "#### 4"), PreferencePair("Q2", "#### 7", "#### 8")]
    critic_q1 = "Q1#### 4" + CRITIC_TEXT
    critic_q2 = "Q2#### 7" + CRITIC_TEXT
    assert pairs["critic"] == [PreferencePair(critic_q1, "Check the sum.", "Looks fine."),
                               PreferencePair(critic_q2, "Right.", "Off by one?")]
    in_context = pairs_from_triples(TRIPLES[:1], actor_context="feedback")["actor"]
    assert in_context == [PreferencePair(critic_q1 + "Check the sum." + f"\n\n{REFINE_LEAD}\n", "#### 5", "#### 4")]
    assert pairs_from_triples(TRIPLES[3:]) == {"actor": [], "critic": []}


def test_pairs_from_triples_bad_input_is_one_line():
    with pytest.raises(ValueError, match="^triple 1: expected a ReflectionTriple; got dict$"):
        pairs_from_triples([TRIPLES[0], {"question": "Q"}])
    with pytest.raises(ValueError, match="actor_context must be one of"):
        pairs_from_triples(TRIPLES, actor_context="history")


def test_pairs_from_the_envs_episodes_use_the_prompts_each_role_saw(tiny_policy):
    env = ReflectionEnv(FixedTask(), max_turns=3)
    starts = [{"options": {"index": 0}}] * 2
    players = {"actor": ScriptedRole(tiny_policy, lambda seen, k: ["#### 9", "#### 2", "#### 2",
                                                                   "#### 9", "#### 9", "#### 2"][k]),
               "critic": ScriptedRole(tiny_policy, lambda seen, k: ["Recheck.", "Good.", "Agreed.", "Nope."][k])}
    episodes = []
    for start in starts:  # one at a time: the scripts' order is the episodes' order
        episodes += rollout(env, players, [start], 1, SamplingSettings())
    assert [e.info["turn_correct"] for e in episodes] == [[False, True, True], [False, False, True]]
    pairs = pairs_from_episodes(episodes, env)
    assert pairs["actor"] == [PreferencePair("Q0? Give the final answer after ####.", "#### 2", "#### 9")]
    critic_seen = players["critic"].seen  # the first critique of both episodes saw the same text
    assert critic_seen[0] == critic_seen[2]
    assert pairs["critic"] == [PreferencePair(critic_seen[0], "Recheck.", "Agreed.")]
    in_context = pairs_from_episodes(episodes, env, actor_context="feedback")["actor"]
    actor_seen = players["actor"].seen
    assert [p.prompt for p in in_context] == [actor_seen[1], actor_seen[5]]
    assert [(p.chosen, p.rejected) for p in in_context] == [("#### 2", "#### 9")] * 2
    with pytest.raises(ValueError, match="^episode 0: not a ReflectionEnv episode"):
        pairs_from_episodes([{"correct": True}], env)
