"""Reflection SFT data: critic and actor-refinement examples mask exactly the trained turn, and lay the turn
out token for token as the episode engine does inside ReflectionEnv (raw and chat requests)."""
import pytest

from lmgym.algorithms.sft_tokens import encode_example
from lmgym.envs import ReflectionEnv
from lmgym.envs.arithmetic import ArithmeticEnv
from lmgym.envs.base import Problem
from lmgym.envs.reflection import DEFAULT_CRITIC_REQUEST
from lmgym.episodes import SamplingSettings, rollout
from lmgym.policies.decoding.generation import Generation
from lmgym.traindata.oracle_feedback import arithmetic_gold, oracle_feedback
from lmgym.traindata.reflection_sft import (
    AnswerRow,
    actor_refinement_sft_examples,
    answer_rows,
    critic_sft_examples,
    turn_tokens,
)

REFINE = "Use the feedback to write a corrected solution. Give the final answer after ####."
WRONG, RIGHT = "7 * 3 = 22\n12 + 22 = 34\n#### 34", "7 * 3 = 21\n12 + 21 = 33\n#### 33"


def problem() -> Problem:
    return Problem("What is 12 + 7 * 3?", "33", "arithmetic/L3/0")


class EosRole:
    """A scripted role that writes its next text and ends it with the end-of-sequence token, as a model
    SFT'd on these examples does; records the token ids each call saw."""

    def __init__(self, policy, texts):
        self.policy, self.texts, self.seen = policy, texts, []
        self.tokenizer, self.use_chat_template, self.device = policy.tokenizer, True, "cpu"
        self.format_prompt, self.encode_text = policy.format_prompt, policy.encode_text
        self.encode_turn = policy.encode_turn

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        out = []
        for ids in prompts:
            text = self.texts[len(self.seen) % len(self.texts)]
            self.seen.append(list(ids))
            completion = self.encode_text(text) + [self.tokenizer.eos_token_id]
            out.append([Generation(list(ids), completion, [-1.0] * len(completion), text, "eos")])
        return out


def trained_text(policy, example) -> tuple[str, str]:
    """(the untrained tokens decoded, the trained tokens decoded)."""
    encoded = encode_example(policy, example)
    context = [t for t, w in zip(encoded.ids, encoded.weights) if not w]
    trained = [t for t, w in zip(encoded.ids, encoded.weights) if w]
    assert encoded.weights == [0] * len(context) + [1] * len(trained)  # one trained span, at the end
    return policy.tokenizer.decode(context), policy.tokenizer.decode(trained)


@pytest.mark.parametrize("turn_role", [None, "user"])
def test_examples_match_what_each_role_sees_in_the_env_token_for_token(tiny_policy, turn_role):
    env = ReflectionEnv(ArithmeticEnv(3, "test"), max_turns=2, turn_role=turn_role)
    p = env.get_problem(0)
    gold = arithmetic_gold(p.question)
    answer = "1 + 1 = 2\n#### 2"
    feedback = oracle_feedback(p.question, answer, gold, False).text
    players = {"actor": EosRole(tiny_policy, [answer, gold.text]), "critic": EosRole(tiny_policy, [feedback])}
    (traj,) = rollout(env, players, [{"options": {"index": 0}}], 1, SamplingSettings(max_new_tokens=64))
    (critic_example,) = critic_sft_examples(env, [AnswerRow(p, answer, False)])
    (actor_example,) = actor_refinement_sft_examples(env, [AnswerRow(p, answer, False)])
    assert (critic_example.target, actor_example.target) == (feedback, gold.text)
    critic_ids, critic_w = turn_tokens(tiny_policy, critic_example)
    actor_ids, actor_w = turn_tokens(tiny_policy, actor_example)
    assert critic_ids[:critic_w.index(1)] == players["critic"].seen[0]  # the critic's view in the episode
    assert actor_ids[:actor_w.index(1)] == players["actor"].seen[1]  # the actor's view at its refine turn
    assert actor_ids == traj.prompt_ids + traj.completion_ids  # the whole episode, the refinement last
    assert sum(actor_w) == len(tiny_policy.encode_text(gold.text)) + 1  # the gold solution and its EOS


def test_critic_examples_mask_exactly_the_feedback(tiny_policy):
    env = ReflectionEnv(ArithmeticEnv(3, "test"), max_turns=2)
    rows = [AnswerRow(problem(), WRONG), AnswerRow(problem(), RIGHT)]
    wrong, right = critic_sft_examples(env, rows)
    assert wrong.role == "critic" and wrong.actions == (WRONG,)
    context, trained = trained_text(tiny_policy, wrong)
    expected_feedback = oracle_feedback(problem().question, WRONG, arithmetic_gold(problem().question)).text
    assert trained == expected_feedback + "<|im_end|>" and "step 1" in trained
    prompt = "What is 12 + 7 * 3? Give the final answer after ####."
    assert context == (f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n{WRONG}<|im_end|>"
                       f"\n\n{DEFAULT_CRITIC_REQUEST}\n")
    assert trained_text(tiny_policy, right)[1].startswith(("The answer is correct", "Correct", "This solution",
                                                           "All steps"))


def test_actor_refinement_examples_mask_exactly_the_gold_solution_chat_mode(tiny_policy):
    env = ReflectionEnv(ArithmeticEnv(3, "test"), max_turns=3, turn_role="user")
    (example,) = actor_refinement_sft_examples(env, [AnswerRow(problem(), WRONG)])
    feedback = oracle_feedback(problem().question, WRONG, arithmetic_gold(problem().question)).text
    assert example.role == "actor" and example.actions == (WRONG, feedback)
    context, trained = trained_text(tiny_policy, example)
    assert trained == RIGHT + "<|im_end|>"
    assert context.endswith(f"{WRONG}<|im_end|>\n<|im_start|>user\n{DEFAULT_CRITIC_REQUEST}<|im_end|>\n"
                            f"<|im_start|>assistant\n{feedback}<|im_end|>\n<|im_start|>user\n{REFINE}<|im_end|>\n"
                            f"<|im_start|>assistant\n")


def test_rows_from_episodes_and_bad_input(tiny_policy):
    env = ReflectionEnv(ArithmeticEnv(3, "test"), max_turns=2)
    p = env.get_problem(1)
    info = {"steps": ["#### 1", "Wrong.", "#### 2"], "turn_correct": [False, False], "problem_id": p.problem_id}
    assert answer_rows([info], env) == [AnswerRow(p, "#### 1", False)]
    with pytest.raises(ValueError, match="episode 0: problem 'nope' is not one of the env's"):
        answer_rows([{**info, "problem_id": "nope"}], env)
    with pytest.raises(ValueError, match="episode 0: not a ReflectionEnv episode"):
        answer_rows([{"steps": []}], env)
    with pytest.raises(ValueError, match="reflection SFT data needs a ReflectionEnv; got ArithmeticEnv"):
        critic_sft_examples(ArithmeticEnv(3, "test"), [])
    with pytest.raises(ValueError, match="row 0: expected an AnswerRow; got tuple"):
        critic_sft_examples(env, [(p, "#### 1")])


def test_math_rows_get_verdict_feedback_and_the_worked_solution(tmp_path):
    import json

    from lmgym.envs import make
    from lmgym.traindata.oracle_feedback import CORRECT_PHRASES, GENERIC_PHRASES
    from lmgym.traindata.reflection_sft import gold_text

    row = {"problem": "What is $2+3$?", "solution": "We add: $2+3=5$, so $\\boxed{5}$.", "answer": "5"}
    (tmp_path / "test.jsonl").write_text(json.dumps(row) + "\n")
    env = make("Reflection-MATH-v0", data_path=tmp_path, split="test", max_turns=2)
    p = env.get_problem(0)
    assert gold_text(p) == row["solution"] and gold_text(problem()) == RIGHT
    wrong, right = critic_sft_examples(env, [AnswerRow(p, "\\boxed{6}", False), AnswerRow(p, "\\boxed{5}", True)])
    assert wrong.target in GENERIC_PHRASES and right.target in CORRECT_PHRASES
    (refine,) = actor_refinement_sft_examples(env, [AnswerRow(p, "\\boxed{6}", False)])
    assert refine.actions == ("\\boxed{6}", wrong.target) and refine.target == row["solution"]
    with pytest.raises(ValueError, match=r"row 0: math/.* has no gold steps; the row needs its verdict"):
        critic_sft_examples(env, [AnswerRow(p, "\\boxed{6}")])
