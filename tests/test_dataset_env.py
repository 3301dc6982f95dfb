"""Dataset-v0: an env from a list of rows or a datasets.Dataset with a "prompt" column, trained with GRPO."""
import pytest
from gymnasium.utils.env_checker import check_env

from lmgym.envs import DatasetEnv, make

ROWS = [
    {"prompt": "Name a color.", "answer": "red", "topic": "colors"},
    {"prompt": [{"role": "user", "content": "What is 2+2?"}], "answer": "4", "topic": "sums"},
]


def letter_count(completions, **kwargs):
    """TRL's signature: a reward per completion (the count of letters a, e, i, o, u)."""
    return [float(sum(c.count(v) for v in "aeiou")) for c in completions]


def test_make_builds_it_from_a_list_of_rows_and_the_reward_sees_the_extra_columns():
    seen = []

    def reward(completions, **kwargs):
        seen.append(kwargs)
        return [1.0]

    env = make("Dataset-v0", dataset=ROWS, reward_fns=[reward])
    assert isinstance(env, DatasetEnv)
    observation, info = env.reset(options={"index": 1})
    assert observation == ROWS[1]["prompt"] and info["gold"] == "4"
    assert env.step("4")[1] == 1.0
    assert seen[0]["topic"] == ["sums"] and seen[0]["answer"] == ["4"] and seen[0]["prompts"] == [ROWS[1]["prompt"]]
    check_env(make("Dataset-v0", dataset=ROWS, reward_fns=[reward]))


def test_it_trains_one_grpo_iteration_on_the_tiny_model(tiny_policy, tmp_path):
    import torch

    from lmgym.algorithms import GRPO, GRPOConfig

    topics = []

    def vowels(completions, topic, **kwargs):
        topics.extend(topic)
        return letter_count(completions)

    env = make("Dataset-v0", dataset=ROWS, reward_fns=[vowels])
    config = GRPOConfig(train_iterations=1, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=8,
                        eval_episodes=2, micro_batch_size=4, learning_rate=1e-2, output_dir=str(tmp_path),
                        progress=False, seed=0, eval_at_start=False)
    before = [p.detach().clone() for p in tiny_policy.model.parameters()]
    [row] = GRPO(tiny_policy, env, config).train()
    assert row["iteration"] == 1 and "reward_vowels" in row
    assert set(topics) <= {"colors", "sums"} and len(topics) >= 8
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_policy.model.parameters()))


def test_a_datasets_dataset_works_too():
    datasets = pytest.importorskip("datasets")
    rows = [{"prompt": "Name a color.", "answer": "red", "topic": "colors"},
            {"prompt": "Name a sum.", "answer": "4", "topic": "sums"}]
    env = make("Dataset-v0", dataset=datasets.Dataset.from_list(rows), reward_fns=[letter_count])
    observation, info = env.reset(options={"index": 1})
    assert observation == "Name a sum." and info["gold"] == "4"
    assert env.step("aei")[1] == 3.0
    chat = datasets.Dataset.from_list([{"prompt": [{"role": "user", "content": "Hi"}], "topic": "x"}])
    assert make("Dataset-v0", dataset=chat, reward_fns=[letter_count]).reset(seed=0)[0] == chat[0]["prompt"]
    with pytest.raises(ValueError, match="dataset has no 'prompt' column; its columns: text"):
        make("Dataset-v0", dataset=datasets.Dataset.from_list([{"text": "x"}]), reward_fns=[letter_count])
    with pytest.raises(ValueError, match=r"pass one split, e.g. dataset\['train'\]"):
        make("Dataset-v0", dataset=datasets.DatasetDict(train=datasets.Dataset.from_list(rows)),
             reward_fns=[letter_count])


@pytest.mark.parametrize("kwargs, message", [
    ({"dataset": [{"text": "x"}]}, "dataset row 0 has no 'prompt' column; got columns text"),
    ({"dataset": []}, "dataset is empty"),
    ({"dataset": "rows.jsonl"}, "dataset must be a datasets.Dataset or a list of dicts"),
    ({"dataset": [{"prompt": 3}]}, "dataset row 0: 'prompt' must be a str or a list of messages"),
    ({"dataset": [{"prompt": [{"role": "bot", "content": "x"}]}]}, "dataset row 0: 'prompt': message 0 has role"),
    ({"dataset": ROWS, "reward_fns": None}, "Dataset-v0 needs reward_fns"),
    ({"dataset": ROWS, "reward_fns": ["not a function"]}, r"reward_fns\[0\] must be callable"),
    ({"dataset": ROWS, "reward_fns": [lambda a, b: [0.0]]}, "fits neither form"),
])
def test_bad_input_is_one_line(kwargs, message):
    kwargs.setdefault("reward_fns", [letter_count])
    with pytest.raises(ValueError, match=message) as error:
        make("Dataset-v0", **kwargs)
    assert "\n" not in str(error.value)


def test_a_list_of_reward_functions_is_named_by_their_names():
    def twin(completions, **kwargs):
        return [0.0]

    env = make("Dataset-v0", dataset=ROWS, reward_fns=[letter_count, twin, twin])
    assert list(env.reward_fns) == ["letter_count", "twin", "twin_2"]
