"""Typed trajectory fields: declared per-token fields, reward shaping, collation by name, reuse by iteration."""
import json

import pytest
import torch

from lmgym.algorithms import GRPO, PPO, GRPOConfig, PPOConfig
from lmgym.buffers import (
    ADVANTAGES,
    OLD_VALUES,
    REF_LOGPROBS,
    RETURNS,
    TOKEN_REWARD_SHAPING,
    ReplayBuffer,
    TokenField,
    Trajectory,
    collate,
)
from lmgym.envs import make
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

SCORE = TokenField("score", "a per-token score declared by a test")


def traj(n: int = 3, reward: float = 1.0, **kwargs) -> Trajectory:
    return Trajectory([1, 2], list(range(4, 4 + n)), [-0.5] * n, [1] * n, reward, **kwargs)


def test_token_field_set_get_has_and_length_check():
    t = traj(3)
    assert not SCORE.has(t)
    SCORE.set(t, [1, 2, 3])
    assert SCORE.has(t) and SCORE.get(t) == [1.0, 2.0, 3.0] and t.token_data == {"score": [1.0, 2.0, 3.0]}
    with pytest.raises(ValueError, match="per-token field 'score' has 2 values for 3 completion tokens") as err:
        SCORE.set(t, [1.0, 2.0])
    assert "\n" not in str(err.value) and SCORE.get(t) == [1.0, 2.0, 3.0]  # the bad values were not stored
    with pytest.raises(ValueError, match="trajectory has no per-token field 'advantages' \\(it holds: score\\)"):
        ADVANTAGES.get(t)
    with pytest.raises(ValueError, match="TokenField: name must be an identifier"):
        TokenField("not a name")


def test_standard_fields_have_distinct_names_and_docs():
    standard = [REF_LOGPROBS, ADVANTAGES, OLD_VALUES, RETURNS, TOKEN_REWARD_SHAPING]
    assert len({f.name for f in standard}) == len(standard) and all(f.doc for f in standard)


def test_new_fields_default_and_env_reward_is_the_reward():
    t = traj(reward=0.5)
    assert (t.env_reward, t.iteration, t.token_data, t.shaping, t.info) == (0.5, 0, {}, {}, {})
    with pytest.raises(ValueError, match="per-token field 'score' has 1 values for 3 completion tokens"):
        traj(token_data={"score": [1.0]})


def test_declared_fields_round_trip_through_dict_and_buffer_file(tmp_path):
    t = traj(reward=1.0, iteration=7)
    SCORE.set(t, [0.1, 0.2, 0.3])
    ADVANTAGES.set(t, [1.0, 0.0, -1.0])
    t.add_shaping("kl_penalty", -0.3, per_token=[-0.1, -0.1, -0.1])
    t.add_shaping("overlong_penalty", -0.25)
    again = Trajectory.from_dict(json.loads(json.dumps(t.to_dict())))
    assert again == t and again.env_reward == 1.0 and again.iteration == 7
    buf = ReplayBuffer(4)
    buf.add(t)
    buf.save(tmp_path / "b.jsonl")
    loaded = ReplayBuffer.load(tmp_path / "b.jsonl")[0]
    assert loaded == t and SCORE.get(loaded) == [0.1, 0.2, 0.3]
    assert loaded.shaping == {"kl_penalty": -0.3, "overlong_penalty": -0.25}


def test_a_record_written_before_the_typed_fields_still_loads(tmp_path):
    old = {"prompt_ids": [1], "completion_ids": [2, 3], "logprobs": [-0.1, -0.2], "completion_mask": [1, 1],
           "reward": 0.75, "step_rewards": [0.75], "step_ends": [1], "group_id": 3, "truncated": False,
           "text": "x", "info": {"correct": True}}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps({"capacity": 2}) + "\n" + json.dumps(old) + "\n")
    t = ReplayBuffer.load(path)[0]
    assert (t.reward, t.env_reward, t.iteration, t.token_data, t.shaping) == (0.75, 0.75, 0, {}, {})
    assert t.info == {"correct": True} and t.group_id == 3


@pytest.mark.parametrize("changes,message", [
    ({"env_reward": "1"}, "env_reward must be a finite number or null, got '1'"),
    ({"iteration": -1}, "iteration must be >= 0, got -1"),
    ({"iteration": 1.5}, "iteration must be int, got float"),
    ({"token_data": []}, "token_data must be dict, got list"),
    ({"token_data": {"score": [1.0, 2.0]}}, r"token_data\['score'\] has 2 values for 3 completion tokens"),
    ({"token_data": {"score": [1.0, None, 2.0]}}, r"token_data\['score'\]\[1\] must be a finite number, got None"),
    ({"shaping": {"kl_penalty": "x"}}, r"shaping\['kl_penalty'\] must be a finite number, got 'x'"),
])
def test_bad_typed_fields_are_one_line_errors_naming_the_field(changes, message):
    record = {**traj().to_dict(), **changes}
    with pytest.raises(ValueError, match=message) as err:
        Trajectory.from_dict(record)
    assert "\n" not in str(err.value)


def test_last_step_shaping_keeps_env_reward():
    t = Trajectory([1], [5, 6, 7, 8], [-1.0] * 4, [1] * 4, 2.0, step_rewards=[0.5, 1.5], step_ends=[1, 3])
    t.add_shaping("overlong_penalty", -0.5)
    t.add_shaping("overlong_penalty", -0.25)
    assert (t.reward, t.env_reward, t.step_rewards, t.shaping) == (1.25, 2.0, [0.5, 0.75], {"overlong_penalty": -0.75})
    assert collate([t], pad_id=0).token_rewards[0].tolist() == [0.0, 0.5, 0.0, 0.75]
    t.reset_run_data()
    assert (t.reward, t.step_rewards, t.shaping) == (2.0, [0.5, 1.5], {})


def test_per_token_shaping_is_added_to_the_token_rewards():
    t = traj(3, reward=1.0)
    t.add_shaping("kl_penalty", -0.6, per_token=[-0.1, -0.2, -0.3])
    t.add_shaping("bonus", 0.3, per_token=[0.1, 0.1, 0.1])
    assert t.env_reward == 1.0 and t.reward == pytest.approx(0.7) and t.step_rewards == [1.0]
    assert TOKEN_REWARD_SHAPING.get(t) == pytest.approx([0.0, -0.1, -0.2])
    assert torch.allclose(collate([t], pad_id=0).token_rewards[0], torch.tensor([0.0, -0.1, 0.8]))
    with pytest.raises(ValueError, match="add_shaping\\('x'\\): per_token sums to 3.0, not to amount 1.0"):
        t.add_shaping("x", 1.0, per_token=[1.0, 1.0, 1.0])
    ADVANTAGES.set(t, [1.0, 1.0, 1.0])
    t.reset_run_data()
    assert (t.reward, t.step_rewards, t.token_data, t.shaping) == (1.0, [1.0], {}, {})


def test_collate_puts_declared_fields_in_by_name():
    a, b = traj(2), traj(3)
    for t in (a, b):
        REF_LOGPROBS.set(t, [-1.0] * len(t.completion_ids))
        SCORE.set(t, [float(i + 1) for i in range(len(t.completion_ids))])
    ADVANTAGES.set(a, [2.0, 2.0])  # not on b: not collated
    batch = collate([a, b], pad_id=0, fields=(SCORE,))
    assert sorted(batch.fields) == ["ref_logprobs", "score"]
    assert batch[SCORE].tolist() == [[1.0, 2.0, 0.0], [1.0, 2.0, 3.0]]
    assert batch.ref_logprobs is batch[REF_LOGPROBS] and batch.advantages is None
    with pytest.raises(KeyError, match="no per-token field 'advantages' \\(collated: ref_logprobs, score\\)"):
        batch[ADVANTAGES]
    assert "score" not in collate([a, b], pad_id=0).fields  # undeclared: left out
    assert batch.to(torch.device("cpu"))[SCORE].tolist() == batch[SCORE].tolist()
    with pytest.raises(AttributeError):
        batch.advantages = torch.zeros(2, 3)  # read-only: write ADVANTAGES on the trajectories


def test_a_changed_length_is_caught_before_collation():
    t = traj(3)
    SCORE.set(t, [1.0, 2.0, 3.0])
    t.token_data["score"].append(4.0)
    with pytest.raises(ValueError, match="per-token field 'score' has 4 values for 3 completion tokens"):
        collate([t], pad_id=0, fields=(SCORE,))


def test_recent_hands_back_earlier_iterations_oldest_first():
    buf = ReplayBuffer(10)
    for it in (3, 1, 2, 3, 0):
        buf.add(traj(reward=float(it), iteration=it, group_id=len(buf)))
    assert [(t.iteration, t.group_id) for t in buf.recent(2, before=4)] == [(2, 2), (3, 0), (3, 3)]
    assert [t.iteration for t in buf.recent(1, before=1)] == [0]
    assert buf.recent(5, before=0) == [] and len(buf.recent(10, before=10)) == 5
    for bad, message in (((0, 3), "iterations must be a positive integer"), ((1, -1), "before must be"),
                         ((True, 2), "iterations must be"), ((1, 2.0), "before must be")):
        with pytest.raises(ValueError, match=message):
            buf.recent(*bad)


@slow
def test_training_stamps_iterations_and_keeps_per_run_data_out_of_info(tiny_policy, tmp_path):
    config = GRPOConfig(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=6,
                        micro_batch_size=4, kl_coeff=0.1, kl_in_reward=True, eval_at_start=False, progress=False,
                        output_dir=str(tmp_path / "run"))
    algo = GRPO(tiny_policy, make("ToyDigits-v0"), config)
    algo.buffer = ReplayBuffer(100)
    algo.buffer.clear = lambda: None  # keep every iteration's episodes (as off-policy reuse will)
    algo.train()
    assert [t.iteration for t in algo.buffer] == [0] * 4 + [1] * 4
    assert algo.buffer.recent(1, before=2) == list(algo.buffer)[4:]
    for t in algo.buffer:
        assert set(t.token_data) == {"ref_logprobs", "advantages"} and set(t.shaping) == {"kl_penalty"}
        assert t.reward == pytest.approx(t.env_reward + t.shaping["kl_penalty"])
        assert not {"ref_logprobs", "advantages", "env_reward", "kl_penalty", "kl_token_penalty"} & set(t.info)


def test_ppo_declares_its_fields_and_advantages_must_be_keyed_by_field(tiny_policy, tmp_path):
    assert PPO.token_fields == (OLD_VALUES, RETURNS)
    config = PPOConfig(prompts_per_iteration=2, samples_per_prompt=1, max_new_tokens=6, micro_batch_size=4,
                       minibatch_size=0, kl_coeff=0.0, progress=False, output_dir=str(tmp_path / "run"))
    algo = PPO(tiny_policy, make("ToyDigits-v0"), config)
    trajs = [traj(3, reward=float(i)) for i in range(2)]
    algo.prepare(trajs)
    assert all(set(t.token_data) == {"old_values", "advantages", "returns"} for t in trajs)

    class StringKeyed(GRPO):
        def advantages(self, batch):
            return {"advantages": batch.loss_mask}

    grpo = StringKeyed(tiny_policy, make("ToyDigits-v0"), GRPOConfig(samples_per_prompt=2, kl_coeff=0.0,
                                                                     progress=False))
    with pytest.raises(TypeError, match="StringKeyed.advantages returned a dict keyed by 'advantages'; key it by"):
        grpo.prepare(trajs)
