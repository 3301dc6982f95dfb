"""gymnasium vector envs with the trainers: refused in one line naming what to pass (the env itself), since
the trainer batches prompts_per_iteration x samples_per_prompt episodes of one env by branching its state."""
import gymnasium
import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.episodes import EpisodeEngine


def arithmetic():
    return make("Arithmetic-v0")


def config(tmp_path):
    return GRPOConfig(train_iterations=1, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=8,
                      eval_episodes=2, micro_batch_size=4, learning_rate=1e-2, output_dir=str(tmp_path),
                      progress=False, seed=0, eval_at_start=False)


def one_line_value_error(call, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as error:
        call(*args, **kwargs)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_sync_vector_env_is_refused_naming_the_env_itself(tiny_policy, tmp_path):
    vector = gymnasium.vector.SyncVectorEnv([arithmetic, arithmetic, arithmetic])
    message = one_line_value_error(GRPO, tiny_policy, vector, config(tmp_path))
    assert message == ("GRPO: got a gymnasium SyncVectorEnv of 3 envs; pass the env itself (e.g. "
                       "lmgym.envs.make('Arithmetic-v0')): the trainer batches prompts_per_iteration x "
                       "samples_per_prompt episodes of one env in each sampling call, branching its saved state")
    assert "SyncVectorEnv of 3" in one_line_value_error(GRPO, tiny_policy, arithmetic(), config(tmp_path),
                                                        eval_env=vector)
    assert one_line_value_error(EpisodeEngine, vector, tiny_policy).startswith("EpisodeEngine: got a gymnasium")


def test_an_async_vector_env_and_a_vector_wrapper_are_refused_too(tiny_policy, tmp_path):
    vector = gymnasium.vector.AsyncVectorEnv([arithmetic, arithmetic], shared_memory=False)
    try:
        assert "AsyncVectorEnv of 2 envs; pass the env itself" in one_line_value_error(
            GRPO, tiny_policy, vector, config(tmp_path))
    finally:
        vector.close()
    wrapped = gymnasium.wrappers.vector.RecordEpisodeStatistics(gymnasium.vector.SyncVectorEnv([arithmetic]))
    assert "RecordEpisodeStatistics of 1 envs" in one_line_value_error(GRPO, tiny_policy, wrapped, config(tmp_path))


def vowels(completions, **kwargs):
    return [float(sum(c.count(v) for v in "aeiou")) for c in completions]


def dataset_env():
    return make("Dataset-v0", dataset=[{"prompt": "Name a color."}, {"prompt": "Name a fruit."}], reward_fns=[vowels])


def test_the_named_alternative_trains(tiny_policy, tmp_path):
    vector = gymnasium.vector.SyncVectorEnv([dataset_env, dataset_env])
    before = [p.detach().clone() for p in tiny_policy.model.parameters()]
    [row] = GRPO(tiny_policy, vector.envs[0], config(tmp_path)).train()  # one of its envs, or make(...) again
    assert row["iteration"] == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_policy.model.parameters()))
