"""Chat-format prompts (lists of {"role", "content"} messages) through an env's reset and a policy's sampling."""
import pytest

from lmgym.envs import LanguageEnv, Problem, correctness_reward
from lmgym.envs.rewards.forms import trl_reward
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.prompting import prompt_ids

CHAT = [{"role": "system", "content": "You add."}, {"role": "user", "content": "What is 2+2?"}]


class ChatEnv(LanguageEnv):
    """One problem whose question is a list of messages."""

    default_reward_fns = {"correctness": correctness_reward}

    def __init__(self, question=None, **kwargs):
        super().__init__(**kwargs)
        self.question = CHAT if question is None else question

    @property
    def num_problems(self) -> int:
        return 1

    def get_problem(self, index: int) -> Problem:
        return Problem(self.question, "4", "chat/0", {"level": 1})


def test_reset_keeps_messages_and_appends_the_instruction_to_the_last_user_turn():
    env = ChatEnv(instruction=" Answer with a number.")
    observation, info = env.reset(seed=0)
    assert observation == [CHAT[0], {"role": "user", "content": "What is 2+2? Answer with a number."}]
    assert CHAT[1]["content"] == "What is 2+2?"  # the problem's messages are not changed
    observation[0]["content"] = "changed"
    assert env.reset(seed=0)[0][0]["content"] == "You add."
    next_observation, reward, terminated, _, step_info = env.step("4")
    assert terminated and reward == 1.0 and step_info["correct"]
    assert next_observation[-1] == {"role": "assistant", "content": "4"}
    assert "user: What is 2+2?" in env.render()


def test_a_trl_reward_gets_the_chat_prompt_and_a_conversational_completion():
    seen = {}

    def reward(prompts, completions, **kwargs):
        seen.update(prompts=prompts, completions=completions, level=kwargs["level"])
        return [1.0]

    env = ChatEnv(reward_fns={"r": reward})
    env.reset(seed=0)
    env.step("4")
    assert seen == {"prompts": [CHAT], "completions": [[{"role": "assistant", "content": "4"}]], "level": [1]}
    env = ChatEnv(reward_fns={"r": trl_reward(reward, conversational=True)})  # the explicit flag still works
    env.reset(seed=0)
    env.step("5")
    assert seen["prompts"] == [CHAT]


@pytest.mark.parametrize("question, message", [
    ([{"role": "robot", "content": "hi"}], "message 0 has role 'robot'"),
    ([{"role": "user", "content": 3}], "message 0 must be an object with a str 'content'"),
    ([], "at least one message"),
])
def test_malformed_messages_are_one_line(question, message):
    with pytest.raises(ValueError, match=message) as error:
        ChatEnv(question=question).reset(seed=0)
    assert "\n" not in str(error.value)


def test_sampling_renders_the_chat_template_with_the_system_prompt_as_today():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu", system_prompt="Be brief.")
    observation, _ = ChatEnv(question=CHAT[1:]).reset(seed=0)
    ids = policy.format_prompt(observation)
    assert tok.decode(ids) == tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, *CHAT[1:]], add_generation_prompt=True, tokenize=False)
    own_system = tok.decode(policy.format_prompt(CHAT))  # the messages' own system turn wins
    assert "You add." in own_system and "Be brief." not in own_system
    [[generation]] = policy.sample([ids], 1, max_new_tokens=4, temperature=0.0)
    assert generation.completion_ids and policy.generate_text([observation], 4) == [generation.text]


def test_a_final_assistant_message_is_continued_not_closed():
    tok = build_tiny_tokenizer()
    text = tok.decode(prompt_ids(tok, [*CHAT, {"role": "assistant", "content": "It is"}], None, True))
    assert text.endswith("It is")


def test_messages_without_a_chat_template_are_one_line():
    tok = build_tiny_tokenizer()
    with pytest.raises(ValueError, match="needs the tokenizer's chat template"):
        prompt_ids(tok, CHAT, None, use_chat_template=False)
    assert prompt_ids(tok, "plain", None, use_chat_template=False) == tok("plain")["input_ids"]
