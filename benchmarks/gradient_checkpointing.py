"""Peak memory and update time with and without `gradient_checkpointing` (and `torch_compile`), on a model
of Qwen2.5-1.5B's shape with random weights built in code (no download), one GPU.

    python benchmarks/gradient_checkpointing.py --out benchmarks/results/checkpointing.json \\
        [--micro-batches 8 32] [--trajectories 32] [--prompt 128] [--completion 1024] [--modes ...]

Each (mode, micro-batch) runs in a process of its own (clean peak-memory counters; an out-of-memory run is
reported, not fatal): GRPO with beta 0.04 (a frozen reference copy), full fine-tuning with fp32 weights
and AdamW, bf16 autocast; `--trajectories` fixed episodes of `--prompt` + `--completion` random tokens in
groups of 8; one warm-up iteration (prepare + update: compiles), then `--steps` timed ones. Reported per
run: seconds of prepare (old and reference log-probs) and update (forward + backward + AdamW), completion
tokens/s of the update, and the peak memory allocated and reserved by torch over the timed iterations.
Modes: eager, eager+ckpt, compile, compile+ckpt (compile: torch_compile on, inductor).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

MODES = ("eager", "eager+ckpt", "compile", "compile+ckpt")
QWEN25_15B = dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                  num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True,
                  max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6)
SHAPES = {"qwen2.5-1.5b": QWEN25_15B,  # W2's model (benchmarks/RESULTS.md)
          "tiny": {**QWEN25_15B, "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}}  # a CPU smoke test


def build_policy(device: str, shape: dict):
    """An HFPolicy around a randomly initialised Qwen2 model of `shape` (the tiny tokenizer: only its pad and
    eos ids are read, every id the model sees is drawn below)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from policies import HFPolicy, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(Qwen2Config(**shape, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id))
    return HFPolicy(model, tok, device=device, fast_decode=False)


def trajectories(n: int, prompt: int, completion: int, vocab: int, seed: int) -> list:
    """`n` episodes in groups of 8 with random token ids and mixed rewards (nonzero advantages)."""
    from buffers import Trajectory

    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        ids = torch.randint(0, vocab, (prompt + completion,), generator=g).tolist()
        out.append(Trajectory(ids[:prompt], ids[prompt:], [-2.0] * completion, [1] * completion,
                              reward=float(i % 3 == 0), group_id=i // 8))
    return out


def one_run(mode: str, micro_batch: int, args: argparse.Namespace) -> dict:
    """Warm-up, then `args.steps` timed iterations of one (mode, micro-batch); its figures."""
    from algorithms import GRPO, GRPOConfig
    from envs import make

    shape = {**SHAPES[args.shape], **({"num_hidden_layers": args.layers} if args.layers else {})}
    policy = build_policy(args.device, shape)
    config = GRPOConfig(train_iterations=1, prompts_per_iteration=args.trajectories // 8, samples_per_prompt=8,
                        micro_batch_size=micro_batch, kl_coeff=0.04, learning_rate=1e-6, progress=False,
                        max_new_tokens=args.completion, gradient_checkpointing=mode.endswith("+ckpt"),
                        torch_compile=mode.startswith("compile"), output_dir=tempfile.mkdtemp())
    algo = GRPO(policy, make("Arithmetic-v0"), config)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    prepare_s, update_s = [], []
    for step in range(1 + args.steps):
        batch = trajectories(args.trajectories, args.prompt, args.completion, shape["vocab_size"], seed=step)
        if step == 1 and args.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        sync()
        start = time.perf_counter()
        algo.prepare(batch)
        sync()
        middle = time.perf_counter()
        algo.update(batch)
        sync()
        if step > 0:
            prepare_s.append(middle - start)
            update_s.append(time.perf_counter() - middle)
    update = statistics.median(update_s)
    result = {"mode": mode, "micro_batch": micro_batch, "prepare_s": statistics.median(prepare_s),
              "update_s": update, "update_tokens_per_s": args.trajectories * args.completion / update,
              "parameters": sum(p.numel() for p in policy.model.parameters())}
    if args.device == "cuda":
        result.update(peak_allocated_gb=torch.cuda.max_memory_allocated() / 1e9,
                      peak_reserved_gb=torch.cuda.max_memory_reserved() / 1e9, device=torch.cuda.get_device_name())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--micro-batches", nargs="+", type=int, default=[8])
    parser.add_argument("--trajectories", type=int, default=32, help="a multiple of 8 (groups of 8)")
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--completion", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=2, help="timed iterations after the warm-up")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-1.5b")
    parser.add_argument("--layers", type=int, help="decoder layers (default: the shape's)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--one", nargs=2, metavar=("MODE", "MICRO_BATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trajectories % 8:
        parser.error("--trajectories must be a multiple of 8")
    if args.one:
        print(json.dumps(one_run(args.one[0], int(args.one[1]), args)))
        return
    rows = []
    forwarded = sys.argv[1:]
    for micro_batch in args.micro_batches:
        for mode in args.modes:
            done = subprocess.run([sys.executable, __file__, *forwarded, "--one", mode, str(micro_batch)],
                                  capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode == 0 and lines:
                row = json.loads(lines[-1])
            else:
                oom = "OutOfMemoryError" in done.stderr or "out of memory" in done.stderr
                row = {"mode": mode, "micro_batch": micro_batch,
                       "error": "out of memory" if oom else done.stderr.strip().splitlines()[-1:]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
