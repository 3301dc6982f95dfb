"""Micro-batches sized by tokens (`max_tokens_per_microbatch`): the grouping (hand cases), the field's checks
and help, and that an optimizer step with a token budget equals the `micro_batch_size` path (reference
log-probs, PPO's values, losses and gradients) while every forward stays within the budget."""
import random

import pytest
import torch

from lmgym.algorithms import GRPO, PPO, GRPOConfig, PPOConfig, RLConfig
from lmgym.algorithms.base import padded_length
from lmgym.buffers import OLD_VALUES, REF_LOGPROBS, Trajectory, collate
from lmgym.envs import make
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.training.config import ConfigError, field_help
from lmgym.training.token_batches import padded_tokens, split_to_count, token_micro_batches
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

# --- the grouping -----------------------------------------------------------------------------------

def check_partition(lengths, groups, budget):
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))  # every item once
    for g in groups:
        assert len(g) == 1 or padded_tokens(lengths, g) <= budget, (g, [lengths[i] for i in g])


def test_hand_cases():
    assert token_micro_batches([], 10) == []
    assert token_micro_batches([3, 3, 3], 9) == [[0, 1, 2]]          # exactly the budget: one micro-batch
    assert token_micro_batches([3, 3, 3], 8) == [[0, 1], [2]]
    # shortest first, ties by index; each micro-batch costs rows x its longest row
    assert token_micro_batches([5, 1, 4, 1, 2], 6) == [[1, 3, 4], [2], [0]]   # 3x2=6, 1x4, 1x5 (2x5=10 > 6)
    assert token_micro_batches([2, 2, 5, 5], 10) == [[0, 1], [2, 3]]          # 3x5=15 > 10: the long pair apart
    # an item longer than the budget runs alone, the others around it are still packed
    assert token_micro_batches([1, 1, 50, 1], 4) == [[0, 1, 3], [2]]
    # items of several rows (a preference pair is two sequences): rows x longest, and a cap on items
    assert token_micro_batches([3, 3, 3], 9, rows=[2, 1, 1]) == [[0, 1], [2]]     # (2+1)x3=9, then 4x3 > 9
    assert token_micro_batches([1, 1, 1, 1, 1], 100, max_items=2) == [[0, 1], [2, 3], [4]]


def test_budget_respected_every_item_once_and_deterministic():
    rng = random.Random(0)
    for _ in range(200):
        lengths = [rng.randint(1, 60) for _ in range(rng.randint(1, 40))]
        budget = rng.randint(1, 200)
        groups = token_micro_batches(lengths, budget)
        check_partition(lengths, groups, budget)
        assert groups == token_micro_batches(list(lengths), budget)                  # deterministic
        flat = [lengths[i] for g in groups for i in g]
        assert flat == sorted(flat)                                                  # sorted by length
        # consecutive micro-batches could not have been merged (fewest cuts of the sorted run)
        for a, b in zip(groups, groups[1:]):
            assert (len(a) + 1) * lengths[b[0]] > budget


def test_bad_budget_is_refused():
    with pytest.raises(ValueError, match="positive integer"):
        token_micro_batches([1, 2], 0)


def test_split_to_count_halves_the_largest_micro_batch():
    lengths = [1, 1, 1, 1, 4, 4]
    groups = [[0, 1, 2, 3], [4, 5]]                    # padded 4 and 8
    assert split_to_count(groups, lengths, 2) == groups
    assert split_to_count(groups, lengths, 3) == [[0, 1, 2, 3], [4], [5]]
    assert split_to_count(groups, lengths, 4) == [[0, 1], [2, 3], [4], [5]]
    assert split_to_count(groups, lengths, 6) == [[0], [1], [2], [3], [4], [5]]
    with pytest.raises(ValueError, match="cannot make 7 micro-batches of 6 items"):
        split_to_count(groups, lengths, 7)
    rng = random.Random(1)
    for _ in range(50):
        lengths = [rng.randint(1, 30) for _ in range(rng.randint(2, 20))]
        budget = rng.randint(10, 100)
        groups = token_micro_batches(lengths, budget)
        for count in range(len(groups), len(lengths) + 1):
            check_partition(lengths, split_to_count(groups, lengths, count), budget)  # still within the budget
            assert len(split_to_count(groups, lengths, count)) == count


# --- the config field ---------------------------------------------------------------------------------

def test_field_checks_and_help():
    assert RLConfig().max_tokens_per_microbatch == 0  # off by default
    assert GRPOConfig(max_tokens_per_microbatch=4096).max_tokens_per_microbatch == 4096
    with pytest.raises(ConfigError) as err:
        GRPOConfig(max_tokens_per_microbatch=-1)
    assert str(err.value) == "GRPOConfig.max_tokens_per_microbatch must be an integer >= 0, got -1"
    assert "padded tokens" in field_help(RLConfig, "max_tokens_per_microbatch")


# --- the same step as micro_batch_size ---------------------------------------------------------------

def mixed_batch(policy):
    """8 trajectories with prompts of 2 lengths and completions of 1..12 tokens, two groups."""
    gens = policy.sample([policy.format_prompt("hi"), policy.format_prompt("a longer prompt here")], n=4,
                         max_new_tokens=6, generator=torch.Generator().manual_seed(1))
    trajs = []
    for i, g in enumerate(gens[0] + gens[1]):
        n = [12, 1, 7, 3, 9, 2, 5, 11][i]
        ids, lps = (g.completion_ids * 12)[:n], (g.logprobs * 12)[:n]
        trajs.append(Trajectory(g.prompt_ids, ids, lps, [1] * n, reward=float(i % 3), group_id=i // 4))
    return trajs


def run_step(algorithm, budget, micro_batch_size=8, **settings):
    """One prepare + update step on the mixed batch: (trajectories, totals, gradients left in .grad, the
    padded shape of every micro-batch of every pass, the shape of every update forward)."""
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    cls, config_cls = {"grpo": (GRPO, GRPOConfig), "ppo": (PPO, PPOConfig)}[algorithm]
    config = config_cls(max_tokens_per_microbatch=budget, micro_batch_size=micro_batch_size, max_grad_norm=0.0,
                        samples_per_prompt=4, prompts_per_iteration=2, max_new_tokens=12, kl_coeff=0.1,
                        kl_in_reward=algorithm == "ppo", progress=False, **settings)
    algo = cls(policy, make("ToyDigits-v0"), config)
    passes, forwards = [], []
    micro_batches, forward = algo.micro_batches, algo.forward

    def spy_micro_batches(trajectories):
        groups = micro_batches(trajectories)
        passes.append([tuple(collate(g, algo.pad_id).input_ids.shape) for g in groups])
        return groups

    def spy_forward(batch):
        forwards.append(tuple(batch.input_ids.shape))
        return forward(batch)

    algo.micro_batches, algo.forward = spy_micro_batches, spy_forward
    trajs = mixed_batch(policy)
    algo.prepare(trajs)
    totals = algo.update_step(trajs)
    params = list(policy.parameters()) + list(getattr(algo, "value_model", torch.nn.Linear(1, 1)).parameters())
    return trajs, totals, [p.grad.clone() for p in params if p.grad is not None], passes, forwards


def assert_same_step(a, b, fields):
    (trajs_a, totals_a, grads_a, _, _), (trajs_b, totals_b, grads_b, _, _) = a, b
    for field in fields:
        for ta, tb in zip(trajs_a, trajs_b):
            assert torch.allclose(torch.tensor(field.get(ta)), torch.tensor(field.get(tb)), atol=1e-5), field.name
    assert set(totals_a) == set(totals_b)
    for name in totals_a:
        assert totals_a[name] == pytest.approx(totals_b[name], rel=1e-5, abs=1e-7), name
    assert len(grads_a) == len(grads_b) and any(g.abs().sum() > 0 for g in grads_a)
    for ga, gb in zip(grads_a, grads_b):
        assert torch.allclose(ga, gb, rtol=1e-4, atol=1e-7)


@slow
@pytest.mark.parametrize("budget", [100, 48])
@pytest.mark.parametrize("algorithm,fields", [("grpo", (REF_LOGPROBS,)), ("ppo", (REF_LOGPROBS, OLD_VALUES))])
def test_token_budget_gives_the_micro_batch_size_step(algorithm, fields, budget, capsys):
    """Reference log-probs (and PPO's old values), the loss terms and every gradient equal one micro-batch of
    the whole batch, while every pass (reference, values, update) runs micro-batches within the budget (rows
    of 22..50 tokens: 100 packs them 3, 2, 2, 1; 48 leaves the longest, 50, alone and says so once)."""
    whole = run_step(algorithm, 0)                  # micro_batch_size 8: one micro-batch of everything
    by_tokens = run_step(algorithm, budget)
    assert_same_step(whole, by_tokens, fields)
    trajs, _, _, passes, forwards = by_tokens
    longest = max(padded_length(t) for t in trajs)
    assert all(p == [(8, longest)] for p in whole[3]) and whole[4] == [(8, longest)]
    assert len(passes) == (3 if algorithm == "ppo" else 2)  # (values,) reference, update
    assert all(p == passes[0] for p in passes) and forwards == passes[-1]  # the update ran these micro-batches
    assert sum(rows for rows, _ in passes[0]) == len(trajs) and max(rows for rows, _ in passes[0]) > 1
    assert all(rows * length <= budget or rows == 1 for rows, length in passes[0]), passes[0]
    warned = capsys.readouterr().err.count(f"longer than max_tokens_per_microbatch={budget}")
    if budget == 100:
        assert [rows for rows, _ in passes[0]] == [3, 2, 2, 1] and warned == 0
    else:
        assert longest > budget and passes[0][-1] == (1, longest) and warned == 1  # once, not per pass


def test_token_budget_matches_small_micro_batches_with_sequence_mean():
    """sequence_mean weighs each row by its own length: still the same step whatever the grouping."""
    a = run_step("grpo", 0, micro_batch_size=3, loss_aggregation="sequence_mean")
    b = run_step("grpo", 64, loss_aggregation="sequence_mean")
    assert_same_step(a, b, (REF_LOGPROBS,))
    assert len(a[3][0]) == 3 and a[3][0] != b[3][0]  # two different groupings


def test_benchmark_smoke(tmp_path):
    """benchmarks/token_budget.py on the tiny model: the same first loss under every setting, less padding
    and no micro-batch over the budget with one (the GPU figures come from its defaults)."""
    import importlib.util
    import json
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "token_budget.py"
    spec = importlib.util.spec_from_file_location("token_budget", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "out.json"
    argv = ["token_budget.py", "--model", "tiny", "--lengths", "8:6,32:2", "--prompt-len", "8", "--group", "4",
            "--micro-batch", "8", "--budget", "64", "--repeats", "1", "--out", str(out)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", argv)
        bench.main()
    fixed, budgeted = json.loads(out.read_text())["rows"]
    assert fixed["first_loss"] == pytest.approx(budgeted["first_loss"], rel=1e-5, abs=1e-7)
    assert budgeted["padded_tokens"] == budgeted["real_tokens"] < fixed["padded_tokens"]
    assert budgeted["largest_micro_batch_tokens"] <= 64 and budgeted["micro_batches"] > fixed["micro_batches"]
