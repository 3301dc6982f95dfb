import numpy as np
import pytest

from lmgym.buffers import ReplayBuffer, Trajectory, collate


def make_traj(i: int, group: int = 0) -> Trajectory:
    return Trajectory(prompt_ids=[1, 2, 3][: 1 + i % 3], completion_ids=[4 + i, 5, 6], logprobs=[-0.1, -0.2, -0.3],
                      completion_mask=[1, 0, 1], reward=float(i), group_id=group, text=f"t{i}",
                      info={"correct": i % 2 == 0})


def test_buffer_add_capacity_sample_minibatches():
    buf = ReplayBuffer(capacity=5)
    buf.extend(make_traj(i) for i in range(7))
    assert len(buf) == 5 and buf[0].reward == 2.0  # oldest dropped
    sample = buf.sample(3, np.random.default_rng(0))
    assert len(sample) == 3 and len({id(t) for t in sample}) == 3
    batches = list(buf.minibatches(2, shuffle=True, rng=np.random.default_rng(0)))
    assert [len(b) for b in batches] == [2, 2, 1]
    assert sorted(t.reward for b in batches for t in b) == [2.0, 3.0, 4.0, 5.0, 6.0]
    with pytest.raises(ValueError, match="asked for 9"):
        buf.sample(9)
    buf.clear()
    assert len(buf) == 0


def test_buffer_save_load_round_trip(tmp_path):
    buf = ReplayBuffer(capacity=10)
    buf.extend(make_traj(i, group=i // 2) for i in range(4))
    buf.save(tmp_path / "buf.jsonl")
    loaded = ReplayBuffer.load(tmp_path / "buf.jsonl")
    assert loaded.capacity == 10
    assert [t.to_dict() for t in loaded] == [t.to_dict() for t in buf]


def test_buffer_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        ReplayBuffer.load(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"capacity": 3}\n{not json\n')
    with pytest.raises(ValueError, match="not a replay buffer file"):
        ReplayBuffer.load(bad)


def test_trajectory_length_mismatch_is_clear():
    with pytest.raises(ValueError, match="same length"):
        Trajectory([1], [2, 3], [-0.1], [1, 1], 0.0)


def test_collate_right_pads_and_points_at_each_completion():
    trajs = [make_traj(0), make_traj(2)]  # prompt lengths 1 and 3
    batch = collate(trajs, pad_id=0)
    assert batch.input_ids[0].tolist() == [1, 4, 5, 6, 0, 0]
    assert batch.input_ids[1].tolist() == [1, 2, 3, 6, 5, 6]
    # padding only at the end of a row: no position is left with nothing to attend to
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]]
    assert batch.completion_positions.tolist() == [[1, 2, 3], [3, 4, 5]]
    assert batch.input_ids.gather(1, batch.completion_positions).tolist() == [[4, 5, 6], [6, 5, 6]]
    assert batch.loss_mask.tolist() == [[1, 0, 1], [1, 0, 1]]
    assert batch.token_rewards[1].tolist() == [0, 0, 2.0]  # reward paid at the last token


def test_right_padded_scoring_equals_scoring_each_sequence_alone(tiny_policy):
    """The batched training pass gives each row the log-probs it has on its own (padding is harmless)."""
    import torch

    trajs = [Trajectory(list(range(3, 3 + p)), list(range(40, 40 + c)), [0.0] * c, [1] * c, 0.0)
             for p, c in [(2, 7), (9, 3), (5, 5)]]
    batch = collate(trajs, pad_id=tiny_policy.tokenizer.pad_token_id)
    lp, _ = tiny_policy.token_logprobs(batch.input_ids, batch.attention_mask, batch.completion_positions)
    for row, t in enumerate(trajs):
        ids = torch.tensor([t.prompt_ids + t.completion_ids])
        alone, _ = tiny_policy.token_logprobs(ids, torch.ones_like(ids), len(t.prompt_ids))
        assert torch.allclose(lp[row, :len(t.completion_ids)], alone[0], atol=1e-5)


def _saved(tmp_path, **changes) -> tuple:
    """A saved two-trajectory buffer whose second record has `changes` applied (as raw JSON)."""
    import json

    buf = ReplayBuffer(capacity=4)
    buf.extend([make_traj(0), make_traj(1)])
    path = tmp_path / "buf.jsonl"
    buf.save(path)
    lines = path.read_text().splitlines()
    record = json.loads(lines[2])
    record.update(changes)
    lines[2] = json.dumps(record)  # allow_nan: NaN/Infinity written as JSON extensions
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("changes,message", [
    ({"completion_ids": ["a", 5, 6]}, r"completion_ids\[0\] must be a non-negative integer token id, got 'a'"),
    ({"prompt_ids": [1, -3]}, r"prompt_ids\[1\] must be a non-negative integer token id, got -3"),
    ({"completion_ids": [4.5, 5, 6]}, r"completion_ids\[0\] must be a non-negative integer token id"),
    ({"reward": float("nan")}, "NaN is not a valid number"),
    ({"reward": float("inf")}, "Infinity is not a valid number"),
    ({"reward": "1.0"}, "reward must be a finite number, got '1.0'"),
    ({"logprobs": [-0.1, None, -0.3]}, r"logprobs\[1\] must be a finite number"),
    ({"completion_mask": [1, 2, 1]}, r"completion_mask\[1\] must be 0 or 1"),
    ({"text": 7}, "text must be str, got int"),
    ({"info": []}, "info must be dict, got list"),
    ({"group_id": True}, "group_id must be int, got bool"),
    ({"bogus": 1}, "unknown field"),
    ({"env_reward": float("nan")}, "NaN is not a valid number"),
    ({"token_data": {"advantages": [1.0]}}, r"token_data\['advantages'\] has 1 values for 3 completion tokens"),
    ({"iteration": "2"}, "iteration must be int, got str"),
])
def test_buffer_load_rejects_bad_fields_naming_file_and_line(tmp_path, changes, message):
    path = _saved(tmp_path, **changes)
    with pytest.raises(ValueError, match=message) as info:
        ReplayBuffer.load(path)
    assert str(info.value).startswith(f"{path}:3: ") and "\n" not in str(info.value)


def test_buffer_load_rejects_a_truncated_file(tmp_path):
    path = _saved(tmp_path)
    data = path.read_bytes()
    for cut in (len(data) - 1, len(data) - 20):  # the newline lost; half of the last record lost
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=rf"{path}:3: the last line is cut off \(the file is truncated\)"):
            ReplayBuffer.load(path)
    for header in (b'{"capacity": -1}\n', b'{"capacity": "9"}\n', b'[]\n'):
        path.write_bytes(header)
        with pytest.raises(ValueError, match=rf"{path}:1: header must be"):
            ReplayBuffer.load(path)


def test_buffer_load_refuses_a_file_truncated_at_a_line_boundary(tmp_path):
    path = _saved(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]))  # the last trajectory lost, the file still ends with a newline
    with pytest.raises(ValueError) as info:
        ReplayBuffer.load(path)
    assert str(info.value) == f"{path}: 1 trajectories, the header says 2 (the file is truncated)"
    path.write_bytes(b"".join(lines + lines[2:]))
    with pytest.raises(ValueError, match=rf"^{path}: 3 trajectories, the header says 2 \(lines were added\)$"):
        ReplayBuffer.load(path)
    path.write_bytes(b'{"capacity": 4}\n' + b"".join(lines[1:]))  # a file of an older version (no count) loads
    assert [t.text for t in ReplayBuffer.load(path)] == ["t0", "t1"]


def test_buffer_load_refuses_a_huge_capacity_naming_the_file(tmp_path):
    path = tmp_path / "buf.jsonl"
    path.write_text('{"capacity": 1000000000000, "count": 0}\n')
    with pytest.raises(ValueError, match=rf"^{path}:1: header must be {{\"capacity\": <integer 1..100_000_000>"):
        ReplayBuffer.load(path)
    with pytest.raises(ValueError, match="capacity must be at most 100_000_000, got 1_000_000_000_000"):
        ReplayBuffer(10**12)


def test_buffer_save_refuses_nan_rewards(tmp_path):
    buf = ReplayBuffer(capacity=2)
    buf.add(Trajectory([1], [2], [-0.1], [1], float("nan")))
    with pytest.raises(ValueError, match="trajectory 0 holds a NaN or infinite number"):
        buf.save(tmp_path / "b.jsonl")
    assert list(tmp_path.iterdir()) == []
