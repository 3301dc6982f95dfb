"""Golden CPU traces: a few iterations of each trainer on the tiny model, every logged number kept exactly.

`python -m tests.golden_traces OUT.json` writes them with the recording machine's processor model, torch
version and vector unit; tests/test_golden_traces.py compares a fresh run with tests/golden/traces.json within
float32 noise on any processor, and bit for bit only on the recording's processor model (another vector unit,
e.g. an AMD EPYC against an Intel Xeon, orders float sums differently from the second update on).
One torch thread: the thread count moves float sums too.
Recorded with scripts/constraints.txt's library versions and torch 2.13.0 (CPU).
"""
from __future__ import annotations

import hashlib
import json
import math
import platform
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SKIPPED = ("time", "tokens_per_second", "seconds")  # wall-clock numbers differ run to run


def _policy():
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")


def _kept(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if not any(s in k for s in SKIPPED)} for row in rows]


def _digest(module: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, p in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()


def _weights(module: torch.nn.Module) -> dict:
    """The weights' L2 norm and their dot product with a fixed random vector (float64): a summary that a
    processor's float noise moves only in the 7th digit, while any real change of the weights moves it."""
    gen = torch.Generator().manual_seed(0)
    squares = projection = 0.0
    for _, p in sorted(module.state_dict().items()):
        x = p.detach().double().flatten()
        squares += float(x @ x)
        projection += float(x @ torch.randn(x.numel(), generator=gen, dtype=torch.float64))
    return {"l2": math.sqrt(squares), "projection": projection}


def _trace(rows: list[dict], module: torch.nn.Module) -> dict:
    return {"rows": _kept(rows), "params": _digest(module), "weights": _weights(module)}


def processor_model() -> str:
    """The CPU's make and model from /proc/cpuinfo on Linux, e.g. 'GenuineIntel 6/207 Intel(R) Xeon(R)
    Processor' (vendor, family/model number, name: clouds name several generations 'Intel(R) Xeon(R)
    Processor'); elsewhere platform.processor()."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if "model name" in fields:
        return f"{fields.get('vendor_id', '?')} {fields.get('cpu family', '?')}/{fields.get('model', '?')} " \
               f"{fields['model name']}"
    return platform.processor() or platform.machine()


def recording_machine() -> dict:
    """What decides whether a trace can be bit-identical to the record: processor, vector unit, torch."""
    return {"cpu_model": processor_model(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch": torch.__version__.split("+")[0]}


def _common(run: Path) -> dict:
    return dict(output_dir=str(run), progress=False, seed=0, eval_at_start=False)


def _letters(completion: str, gold: str, info: dict) -> float:
    return sum(ch.isalpha() for ch in completion) / max(len(completion), 1)


def _rl(name: str, run: Path) -> dict:
    """ToyDigits-v0 (tests/toy_env.py) with a second reward component, so combination is traced too."""
    from lmgym.algorithms import GRPO, PPO, GRPOConfig, PPOConfig, ReinforceStable, ReinforceStableConfig
    from lmgym.envs import make
    from tests.toy_env import digit_fraction

    classes = {"grpo_std": (GRPO, GRPOConfig, {"kl_coeff": 0.05, "reward_combination": "std"}),
               "grpo_pca": (GRPO, GRPOConfig, {"reward_combination": "pca"}),
               "ppo": (PPO, PPOConfig, {"reward_combination": "uniform"}),
               "reinforce": (ReinforceStable, ReinforceStableConfig, {"kl_coeff": 0.05, "reward_combination": "l2"})}
    cls, config_cls, extra = classes[name]
    config = config_cls(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=8,
                        eval_episodes=4, micro_batch_size=4, learning_rate=1e-3, **extra, **_common(run))
    policy = _policy()
    rewards = {"digits": digit_fraction, "letters": _letters}
    algo = cls(policy, make("ToyDigits-v0", reward_fns=rewards), config,
               eval_env=make("ToyDigits-v0", reward_fns=rewards))
    return _trace(algo.train(), policy.model)


def _sft(run: Path) -> dict:
    from lmgym.algorithms import SFT, SFTConfig
    from lmgym.traindata import arithmetic_sft_examples

    policy = _policy()
    config = SFTConfig(train_iterations=2, learning_rate=1e-3, **_common(run))
    trainer = SFT(policy, arithmetic_sft_examples(level=1, n=8, seed=0), config)
    return _trace(trainer.train(), policy.model)


def _dpo(run: Path) -> dict:
    from lmgym.algorithms import DPO, DPOConfig
    try:
        from lmgym.traindata import PreferencePair
    except ImportError:
        from lmgym.algorithms import PreferencePair

    pairs = [PreferencePair(f"What is {a} + {a}?", f"{2 * a}", f"{2 * a + 1}") for a in range(1, 7)]
    policy = _policy()
    config = DPOConfig(train_iterations=2, pairs_per_iteration=4, learning_rate=1e-3, **_common(run))
    trainer = DPO(policy, pairs, config)
    return _trace(trainer.train(), policy.model)


def _prm(run: Path) -> dict:
    from lmgym.algorithms import PRMConfig, PRMTrainer
    from lmgym.policies import ProcessRewardModel
    from lmgym.traindata.step_data import arithmetic_pairs

    prm = ProcessRewardModel.from_policy(_policy())
    config = PRMConfig(train_iterations=2, pairs_per_iteration=4, learning_rate=1e-3, **_common(run))
    trainer = PRMTrainer(prm, arithmetic_pairs([1], 3, seed=0), config)
    return _trace(trainer.train(), prm)


def traces() -> dict:
    """Every trainer's trace: its logged rows (wall-clock numbers left out), a digest of its weights (exact
    checks) and a summary of them (checks within float noise)."""
    torch.set_num_threads(1)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("grpo_std", "grpo_pca", "ppo", "reinforce"):
            out[name] = _rl(name, Path(tmp) / name)
        out["sft"] = _sft(Path(tmp) / "sft")
        out["dpo"] = _dpo(Path(tmp) / "dpo")
        out["prm"] = _prm(Path(tmp) / "prm")
    return json.loads(json.dumps(out, default=float))


def record(recorded_at: str) -> dict:
    """A golden file's content: this machine's traces and what they were recorded on."""
    return {**recording_machine(), "recorded_at": recorded_at, "traces": traces()}


if __name__ == "__main__":
    note = sys.argv[2] if len(sys.argv) > 2 else "re-recorded"
    Path(sys.argv[1]).write_text(json.dumps(record(note), indent=1, sort_keys=True) + "\n")
