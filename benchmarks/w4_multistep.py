"""W4, the multi-step benchmark (issue 35), with W1 beside it, in one invocation on one GPU.

    python benchmarks/w4_multistep.py --data_path ../shared/data/hotpotqa --label after --out w4_after.json
    PYTHONPATH=/path/to/old/checkout python benchmarks/w4_multistep.py --data_path ../shared/data/hotpotqa \\
        --label before --out w4_before.json
    python benchmarks/w4_multistep.py --compare w4_before.json w4_after.json      # speed-ups, after over before
    python benchmarks/w4_multistep.py --tiny --data_path ../shared/data/hotpotqa --no_dense --out /tmp/w4.json

Which code is measured: the lmgym of the first PYTHONPATH entry that holds one (a checkout of older code), else
this script's own tree; examples/ (the presets) and benchmarks/w1_benchmark.py come from that same tree when it
has them, so each run is one consistent version. The JSON records the tree and its commit.

Workloads (--workloads, in order; benchmarks/w4_workloads.py has their settings, the examples' gpu presets):
- w1: benchmarks/w1_benchmark.py's own side (`run_toolkit`, GSM8K from --gsm8k), a few steps.
- w4a: Monte-Carlo step labels (policy_labels: 8 samples, k = 4 rollouts from every step prefix, stepwise
  Arithmetic-v0 level 3), --w4a_problems problems in batches of 64, --w4a_chunk problems (four batches) a
  labelling call, as a labelling run calls it once over all of its batches.
- w4b: the RAG agent's GRPO iterations (16 questions x 8 episodes, 3 searches of 3 passages, 64 tokens a turn,
  LoRA, the hybrid index) on the HotpotQA files of --data_path, from the base model (no SFT: a speed benchmark).
- w4c: greedy reflection evaluation, --w4c_problems problems x 5 actor turns with the critic between them.
Each W4 workload runs a warm-up chunk (reported apart: compilation, CUDA graph capture), then measured chunks
in order until all ran or --measure_s seconds of them did, then one chunk under torch.profiler. Between two
training workloads torch._dynamo is reset (each compiles as it would in a process of its own). --time_limit_s
bounds the whole run: past it no workload starts and a running one stops after its first measured chunk, without
its profiled one. One workload failing is recorded (its error and traceback in the JSON) and the others run;
the exit status is then 1.

Reported per W4 workload: generated tokens/s; context tokens/s (the tokens every sampled action was conditioned
on: the same count whatever the engine, so a cache that reads a shared prefix once raises it); seconds per
iteration (w4b) or per 1,000 episodes (w4a: solutions and rollouts; w4c: problems), w4a's projected time for
2,000 problems; peak GPU memory; the GPU-busy share (the union of CUDA kernel intervals over the profiled
chunk's wall time; NVML's own counter over the measured run beside it); and the wall time split into prefill,
decode, stop-string checks, the sampler's host work, env and tool calls (retrieval included), tokenisation,
the trainer's update and host bookkeeping, profiled and by the host clock alone (benchmarks/w4_phases.py says
how each is counted). A JSON file (--out, rewritten after every chunk) and a markdown table on stdout.

--tiny: a random 2-layer model built in code and tiny sizes (every size flag still applies), on the CPU in a
minute or two: for developing the benchmark, not for figures.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

if "--tiny" in sys.argv:  # a CPU run on few cores: idle OpenMP threads sleep (set before torch starts its pool)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = Path(__file__).resolve().parent
SCRIPT_ROOT = HERE.parent


def code_root() -> Path:
    """The tree whose lmgym is measured: the first PYTHONPATH entry holding one, else this script's."""
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and (Path(entry) / "lmgym" / "__init__.py").is_file():
            return Path(entry).resolve()
    return SCRIPT_ROOT


CODE_ROOT = code_root()
EXAMPLES = CODE_ROOT / "examples" if (CODE_ROOT / "examples" / "rag_agent.py").is_file() else SCRIPT_ROOT / "examples"
W1_FILE = (CODE_ROOT if (CODE_ROOT / "benchmarks" / "w1_benchmark.py").is_file() else SCRIPT_ROOT) / \
    "benchmarks" / "w1_benchmark.py"
for path in (HERE, EXAMPLES, CODE_ROOT):  # CODE_ROOT ends first: its lmgym wins
    sys.path.insert(0, str(path))


import torch  # noqa: E402
from w4_phases import RangeClock, cupti_settings, install_clock  # noqa: E402
from w4_report import compare, markdown  # noqa: E402
from w4_workloads import (  # noqa: E402
    Context,
    EngineCounter,
    LabelWorkload,
    RagWorkload,
    ReflectionWorkload,
    measure,
    module_from,
    release,
    run_w1,
    workload_policy,
)

WORKLOADS = ("w1", "w4a", "w4b", "w4c")
TRAINING = {"w1", "w4b"}
TINY = {"w1_steps": 2, "w1_warmup": 1, "w1_prompts": 2, "w1_group": 2, "w1_max_new": 8, "max_new_tokens": 8,
        "w4a_problems": 2, "w4a_batch": 1, "w4a_chunk": 1, "w4a_warmup_problems": 1, "w4a_profile_problems": 1,
        "w4a_samples": 2, "w4a_rollouts": 1, "w4a_max_steps": 3, "w4b_iterations": 1, "w4b_questions": 2,
        "w4b_episodes": 2, "w4c_problems": 4, "w4c_batch": 2, "w4c_warmup_problems": 2, "w4c_profile_problems": 2}


def build_parser() -> argparse.ArgumentParser:
    from examples.common import example_parser

    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--compare", nargs=2, metavar=("OLD", "NEW"), default=None,
        help="print the speed-ups of NEW's run over OLD's (two --out files) and exit")
    add("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, of {', '.join(WORKLOADS)} (default all)")
    add("--label", default="", help="the run's name in the JSON and the tables (e.g. before, after)")
    add("--out", default=None, help="the JSON file (required unless --compare)")
    add("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available")
    add("--model", default=None, help="the policy (default: the embedded SmolLM2-135M-Instruct)")
    add("--tiny", action="store_true", help="a random 2-layer model built in code and tiny sizes (CPU development)")
    add("--data_path", default=None, help="HotpotQA file or folder of files (w4b), e.g. ../shared/data/hotpotqa")
    add("--gsm8k", default=None, help="GSM8K train JSONL (w1; default: <data_path>/../gsm8k/train.jsonl)")
    add("--no_dense", action="store_true", help="w4b's index is BM25 only (the preset adds MiniLM embeddings)")
    add("--seed", type=int, default=0)
    add("--measure_s", type=float, default=60.0,
        help="a W4 workload starts no further measured chunk after this many measured seconds (default 60)")
    add("--profile", action=argparse.BooleanOptionalAction, default=True, help="the profiled chunk (default on)")
    add("--time_limit_s", type=float, default=0.0,
        help="after this many seconds of the run no chunk starts (a workload not begun is skipped, one begun ends "
             "after its first measured chunk, without its profiled one; 0: no limit)")
    add("--max_new_tokens", type=int, default=None, help="tokens per action in every W4 workload (default: presets)")
    add("--decode_cache_gb", type=float, default=None,
        help="GB of KV buckets each workload's fast decoder keeps between calls (default: the decoder's, a "
             "sixteenth of the GPU); a multi-step workload whose buckets do not fit makes them anew every call")
    add("--label_kept_cache_share", type=float, default=None,
        help="W4a's PolicyLabelConfig.kept_cache_share (default: the config's; 0: the decoder's usual budget)")
    add("--decoder_set", action="append", default=[], metavar="FIELD=VALUE", dest="decoder_overrides",
        help="an attribute of each W4 workload's fast decoder set after it is built (a JSON value), e.g. "
             "sync_every=16; repeatable")
    add("--w4a_set", action="append", default=[], metavar="FIELD=VALUE", dest="label_overrides",
        help="a PolicyLabelConfig field of W4a's labelling calls set over the gpu preset's (a JSON value), e.g. "
             "overlap_batches=false; repeatable")
    add("--w4b_set", action="append", default=[], metavar="FIELD=VALUE", dest="grpo_overrides",
        help="a GRPOConfig field of W4b set over the gpu preset's (a JSON value, else a string), e.g. "
             "gradient_checkpointing=false; repeatable")
    sizes = parser.add_argument_group("sizes (default: the presets; --tiny: tiny ones)")
    for name, default, what in (
            ("w1_steps", 4, "W1 steps"), ("w1_warmup", 1, "W1 warm-up steps (not measured)"),
            ("w1_prompts", None, "W1 prompts a step (default 16)"), ("w1_group", None, "W1 samples a prompt (8)"),
            ("w1_max_new", None, "W1 new tokens at most (256)"),
            ("w4a_problems", 256, "problems labelled in measured chunks"),
            ("w4a_batch", None, "problems a labelling batch (policy_labels batch_size; preset 64)"),
            ("w4a_chunk", 256, "problems a chunk, one policy_labels call over its batches (at least a batch; the "
                               "twenty-fourth session's W4 made a call a batch: --w4a_chunk 64)"),
            ("w4a_warmup_problems", 8, "problems of the warm-up chunk"),
            ("w4a_profile_problems", 128, "problems of the profiled chunk"),
            ("w4a_samples", None, "solutions a problem (preset 8)"), ("w4a_rollouts", None, "k (preset 4)"),
            ("w4a_max_steps", None, "steps an episode (verifier_loop's gpu 8)"),
            ("w4b_iterations", 3, "measured GRPO iterations (one warm-up and one profiled beside them)"),
            ("w4b_questions", None, "questions an iteration (preset 16)"),
            ("w4b_episodes", None, "episodes a question (preset 8)"),
            ("w4c_problems", 256, "problems evaluated in measured chunks"),
            ("w4c_batch", None, "problems a chunk (the gpu preset's batch_prompts, 256)"),
            ("w4c_warmup_problems", 8, "problems of the warm-up chunk"),
            ("w4c_profile_problems", 256, "problems of the profiled chunk (one batch at most)"),
            ("w4c_turns", None, "actor answers an episode (5)")):
        sizes.add_argument(f"--{name}", type=int, default=None, help=f"{what} (default {default})")
        parser.set_defaults(**{f"_default_{name}": default})
    return parser


def resolve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Sizes (a flag, else --tiny's, else the default), the device, the model and the data; bad input: one line."""
    for name in [a.dest for a in parser._actions if a.dest.startswith(("w1_", "w4"))]:
        if getattr(args, name) is None:
            setattr(args, name, TINY.get(name) if args.tiny else getattr(args, f"_default_{name}"))
        value = getattr(args, name)
        if value is not None and value < (0 if "warmup" in name or "profile" in name else 1):
            parser.error(f"--{name} must be >= {0 if 'warmup' in name or 'profile' in name else 1}, got {value}")
    if args.max_new_tokens is None and args.tiny:
        args.max_new_tokens = TINY["max_new_tokens"]
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown or not args.workloads:
        parser.error(f"--workloads: {', '.join(unknown) or 'none given'}; choose from {', '.join(WORKLOADS)}")
    if args.out is None:
        parser.error("--out is required (the JSON file)")
    cuda = torch.cuda.is_available()
    args.device = args.device or ("cuda" if cuda else "cpu")
    if args.device == "cuda" and not cuda:
        parser.error("--device cuda: no CUDA device here")
    if args.device == "cpu" and cuda:
        parser.error("--device cpu on a machine with CUDA: run with CUDA_VISIBLE_DEVICES= (w1 takes the default "
                     "device)")
    if "w4b" in args.workloads and not args.data_path:
        parser.error("w4b needs --data_path (a HotpotQA file or folder)")
    if args.data_path and not Path(args.data_path).exists():
        parser.error(f"--data_path {args.data_path} does not exist")
    if args.gsm8k is None and args.data_path:
        guess = Path(args.data_path).resolve().parent / "gsm8k" / "train.jsonl"
        args.gsm8k = str(guess) if guess.is_file() else None
    if "w1" in args.workloads and not (args.gsm8k and Path(args.gsm8k).is_file()):
        parser.error(f"w1 needs --gsm8k (a GSM8K train JSONL): {args.gsm8k or 'none given or found'}")
    return args


def tiny_model_folder() -> str:
    """A random 2-layer Llama and its character tokenizer (lmgym's test model), saved to a temporary folder."""
    from lmgym.policies import build_tiny_model, build_tiny_tokenizer
    from lmgym.policies.loading.models import save_plain_copy

    tokenizer = build_tiny_tokenizer()
    folder = Path(tempfile.mkdtemp(prefix="w4_tiny_model_"))
    save_plain_copy(build_tiny_model(tokenizer, seed=0), tokenizer, folder)
    return str(folder)


def git_state(root: Path) -> dict:
    """The commit of `root` and whether its lmgym differs from it (None where git cannot tell)."""
    def git(*cmd: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *cmd], capture_output=True, text=True, timeout=20)
            return done.stdout.strip() if done.returncode == 0 else None
        except (OSError, subprocess.SubprocessError):
            return None

    status = git("status", "--porcelain", "--", "lmgym")
    return {"commit": git("rev-parse", "HEAD"), "lmgym_modified": None if status is None else bool(status)}


def write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=1, default=str) + "\n")
    tmp.replace(path)


def run(args: argparse.Namespace) -> dict:
    import lmgym
    from lmgym.policies import EMBEDDED_MODEL

    started = time.perf_counter()
    cupti_settings()
    device = torch.device(args.device)
    model = args.model or (tiny_model_folder() if args.tiny else EMBEDDED_MODEL)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results = {"label": args.label, "date": time.strftime("%Y-%m-%d %H:%M"), "argv": sys.argv[1:],
               "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               "torch": torch.__version__, "model": "tiny (random, built in code)" if args.tiny and not args.model
               else model, "tiny": args.tiny, "code_root": str(CODE_ROOT), "lmgym_file": lmgym.__file__,
               "examples": str(EXAMPLES), "w1_file": str(W1_FILE), "git": git_state(CODE_ROOT), "notes": [],
               "workloads": {}}

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f} s] {message}", flush=True)

    ctx = Context(device, model, args.seed, args.measure_s, args.profile, RangeClock(), EngineCounter(),
                  save=lambda: write_json(out, results), log=log, notes=results["notes"],
                  deadline=started + args.time_limit_s if args.time_limit_s > 0 else None)
    log(f"measuring {CODE_ROOT} (lmgym {lmgym.__file__}) on {results['device']}, model {results['model']}")
    trained = False
    for name in args.workloads:
        record = results["workloads"].setdefault(name, {})
        if ctx.past_deadline():
            record["error"] = f"skipped: --time_limit_s {args.time_limit_s:g} spent"
            log(f"[{name}] {record['error']}")
            continue
        if name in TRAINING and trained:
            torch._dynamo.reset()
            record["dynamo_reset_before"] = True
        clock = time.perf_counter()
        work = None
        try:
            work = build(name, args, ctx)
            cache = [] if args.decode_cache_gb is None else [f"cache_bytes={int(args.decode_cache_gb * 1e9)}"]
            if cache or args.decoder_overrides:
                record["decoder_set"] = set_decoder(work, cache + args.decoder_overrides)
            install_clock(ctx.clock)
            ctx.counter.install()
            if name == "w1":
                record.update(run_w1(work, ctx, args.gsm8k, args.w1_steps, args.w1_warmup, args.w1_prompts,
                                     args.w1_group, args.w1_max_new))
            else:
                measure(work, ctx, record)
            save_bucket_trace(work, out, name, record)
        except Exception as err:  # noqa: BLE001 - one workload failing leaves the others to run
            record["error"] = f"{type(err).__name__}: {' '.join(str(err).split())[:500]}"
            record["traceback"] = traceback.format_exc()[-4000:]
            log(f"[{name}] FAILED: {record['error']}")
        trained = trained or name in TRAINING
        record["workload_s"] = time.perf_counter() - clock
        log(f"[{name}] done in {record['workload_s']:.1f} s")
        if ctx.counter.error:
            results["notes"].append(f"context tokens not counted: {ctx.counter.error}")
        release(work)
        work = None
        release()
        write_json(out, results)
    results["total_s"] = time.perf_counter() - started
    write_json(out, results)
    return results


def save_bucket_trace(work, out: Path, name: str, record: dict) -> None:
    """The workload's bucket requests, when `--decoder_set bucket_trace=[]` asked for them, beside `out`
    (<out stem>.<workload>.buckets.json; `python benchmarks/bucket_replay.py` replays them under other rules)."""
    trace = getattr(getattr(workload_policy(work), "fast_decoder", None), "bucket_trace", None)
    if trace is not None:
        path = out.with_name(f"{out.stem}.{name}.buckets.json")
        path.write_text(json.dumps({"workload": name, "requests": trace}) + "\n")  # compact: thousands of entries
        record["bucket_trace"] = str(path)
    steps = getattr(getattr(workload_policy(work), "fast_decoder", None), "shape_steps", None)
    if steps is not None:  # --decoder_set shape_steps={}: decode steps (and rows playing x steps) by bucket
        record["shape_steps"] = dict(sorted(steps.items(), key=lambda item: -item[1][0]))


def set_decoder(work, pairs: list[str]) -> dict | None:
    """--decoder_set's FIELD=VALUE pairs set on the workload's fast decoder (VALUE read as JSON); the values set,
    or None without a decoder (W1 builds its policy per run). A FIELD the decoder lacks is one line that names it.
    --decode_cache_gb comes here as cache_bytes."""
    decoder = getattr(workload_policy(work), "fast_decoder", None)
    if decoder is None:
        return None
    out = {}
    for pair in pairs:
        field, sep, value = pair.partition("=")
        try:
            if not sep or not hasattr(decoder, field):
                raise ValueError
            out[field] = json.loads(value)
        except ValueError:  # json's JSONDecodeError too
            raise SystemExit(f"w4_multistep: --decoder_set {pair!r}: expected FIELD=VALUE, FIELD a FastDecoder "
                             "attribute and VALUE JSON") from None
        setattr(decoder, field, out[field])
    return out


def config_overrides(pairs: list[str], config: type | None = None, flag: str = "--w4b_set") -> dict:
    """--w4b_set's (or `flag`'s) FIELD=VALUE pairs as a dict (VALUE read as JSON, else kept as a string); a pair
    without '=' or naming no field of `config` (default GRPOConfig) is one line that names it."""
    from dataclasses import fields

    if config is None:
        from lmgym.algorithms import GRPOConfig as config

    known, out = {f.name for f in fields(config)}, {}
    for pair in pairs:
        field, sep, value = pair.partition("=")
        if not sep or field not in known:
            raise SystemExit(f"w4_multistep: {flag} {pair!r}: expected FIELD=VALUE with FIELD a {config.__name__} "
                             f"field")
        try:
            out[field] = json.loads(value)
        except json.JSONDecodeError:
            out[field] = value
    return out


def build(name: str, args: argparse.Namespace, ctx: Context):
    """The workload object (w1: benchmarks/w1_benchmark.py as a module)."""
    if name == "w1":
        return module_from(W1_FILE, "w1_benchmark")
    if name == "w4a":
        from lmgym.traindata.step_data.policy_labels import PolicyLabelConfig

        return LabelWorkload(ctx, args.w4a_problems, args.w4a_warmup_problems, args.w4a_profile_problems,
                             args.w4a_batch, args.w4a_samples, args.w4a_rollouts, args.max_new_tokens,
                             args.w4a_max_steps, args.label_kept_cache_share,
                             config_overrides(args.label_overrides, PolicyLabelConfig, "--w4a_set"), args.w4a_chunk)
    if name == "w4b":
        return RagWorkload(ctx, args.data_path, args.w4b_iterations, args.w4b_questions, args.w4b_episodes,
                           args.max_new_tokens, dense=not args.no_dense,
                           overrides=config_overrides(args.grpo_overrides))
    return ReflectionWorkload(ctx, args.w4c_problems, args.w4c_warmup_problems, args.w4c_profile_problems,
                              args.w4c_batch, args.w4c_turns, args.max_new_tokens)


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.compare:
        old, new = (json.loads(Path(p).read_text()) for p in args.compare)
        print(compare(old, new), end="")
        return
    results = run(resolve(args, parser))
    print(markdown(results), end="")
    failed = [name for name, r in results["workloads"].items() if "error" in r]
    if failed:
        print(f"failed: {', '.join(failed)} (see 'error' and 'traceback' in {args.out})")
        sys.exit(1)


if __name__ == "__main__":
    main()
