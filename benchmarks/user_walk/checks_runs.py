"""The walk's checks of the command line, runs and checkpoints, the trained model's Hugging Face shape and the
server (issue 27's second half), run as user code in the user's folder against the installed wheel."""
from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from walkkit import (
    CLI_LEARNING_RATE,
    LocalHub,
    Verdict,
    Walk,
    expectation,
    fails,
    last_lines,
    lmgym_home,
    load_example,
    metric_rows,
    one_line,
    partly,
    untimed,
    works,
)

# ---------------------------------------------------------------------------------------------------------------
# Command line and runs


@expectation("cli", "a YAML file with --config, flags overriding it, the resolved config saved in the run folder",
             group="runs")
def yaml_plus_flags(walk: Walk) -> Verdict:
    runs = walk.cli_runs
    code, out, err = runs["straight_proc"]
    if code != 0:
        return fails(f"quickstart exit {code}: {last_lines(err)}")
    saved = json.loads((runs["straight"] / "config.json").read_text())
    config = saved.get("config", saved)
    got = {k: config.get(k) for k in ("learning_rate", "seed", "micro_batch_size", "train_iterations")}
    want = {"learning_rate": CLI_LEARNING_RATE, "seed": 3, "micro_batch_size": 4, "train_iterations": 6}
    if got != want:
        return fails(f"config.json has {got}, expected {want} (preset < YAML < flags)")
    return works("preset < YAML < flag: learning_rate from the flag, seed and micro_batch_size from the YAML, in "
                 "config.json")


@expectation("cli", "`--help` lists every config field as a flag with its help and default")
def cli_help(walk: Walk) -> Verdict:
    import dataclasses

    from lmgym.algorithms import GRPOConfig

    proc = walk.quickstart("--help")
    if proc.returncode != 0:
        return fails(f"exit {proc.returncode}: {last_lines(proc.stderr)}")
    names = [f.name for f in dataclasses.fields(GRPOConfig) if not dataclasses.is_dataclass(f.type)]
    missing = [n for n in names if f"--{n}" not in proc.stdout]
    if missing:
        return partly(f"{len(missing)} fields without a flag in --help: {missing[:4]}")
    defaults = proc.stdout.count("(default")
    return works(f"exit 0, {len(proc.stdout.splitlines())} lines; every GRPOConfig field listed, {defaults} with "
                 "'(default ...)'")


def refused_in_one_line(proc: subprocess.CompletedProcess, suggestion: str) -> tuple[bool, str]:
    lines = proc.stderr.strip().splitlines()
    ok = proc.returncode == 2 and len(lines) == 1 and suggestion in lines[0]
    return ok, (lines[-1] if lines else f"exit {proc.returncode}, nothing on stderr")


@expectation("cli", "a typo'd flag (`--learning_rat`) is one error line that suggests the right flag")
def cli_typo_suggestion(walk: Walk) -> Verdict:
    proc = walk.quickstart("--learning_rat", "1e-5")
    ok, line = refused_in_one_line(proc, "--learning_rate")
    if ok:
        return works(one_line(line))
    return fails(f"exit {proc.returncode}, {len(proc.stderr.splitlines())} lines: {one_line(line)}")


@expectation("cli", "an abbreviated flag (`--learn`) is refused, never silently read as another flag")
def cli_no_abbrev(walk: Walk) -> Verdict:
    proc = walk.quickstart("--learn", "1e-5", "--model", str(walk.tmp / "no-such-model"))
    ok, line = refused_in_one_line(proc, "--learning_rate")
    if ok and "unknown flag --learn" in line:
        return works(one_line(line))
    return fails(f"exit {proc.returncode}: {one_line(line)}")


@expectation("cli", "`--lr` (the common short name) either sets the learning rate or says to use --learning_rate")
def cli_lr_alias(walk: Walk) -> Verdict:
    proc = walk.quickstart("--lr", "1e-5", "--model", str(walk.tmp / "no-such-model"))
    ok, line = refused_in_one_line(proc, "--learning_rate")
    if ok:
        return works(f"refused in one line naming the right flag: {one_line(line)}")
    return fails(f"exit {proc.returncode}: {one_line(line)}")


@expectation("runs", "the run folder has metrics.jsonl (a row per iteration) and PNG plots", group="runs")
def metrics_and_plots(walk: Walk) -> Verdict:
    run = walk.cli_runs["straight"]
    rows = metric_rows(run)
    plot = run / "metrics.png"
    if [r["iteration"] for r in rows] != list(range(1, 7)):
        return fails(f"iterations logged: {[r['iteration'] for r in rows]}")
    if not plot.is_file() or plot.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
        return fails("no metrics.png")
    keys = [k for k in ("reward", "kl", "entropy", "loss") if any(k in r or f"{k}_mean" in r for r in rows)]
    return works(f"6 rows ({len(rows[-1])} keys, e.g. {', '.join(keys)}), metrics.png")


@expectation("runs", "Ctrl-C during training prints one line and exits 130, leaving a resumable checkpoint",
             group="runs")
def ctrl_c_one_line_130(walk: Walk) -> Verdict:
    runs = walk.cli_runs
    code, out, err = runs["interrupt_proc"]
    if runs["sent_after"] is None:
        return fails(f"the run ended (exit {code}) before SIGINT could be sent")
    lines = [line for line in err.strip().splitlines() if line.strip()]
    pattern = r"interrupted at iteration (\d+); resume with --resume \(run folder .+\)"
    if code != 130:
        return fails(f"exit {code} after SIGINT; stderr {len(lines)} lines: {last_lines(err, 1)}")
    if len(lines) != 1 or not re.fullmatch(pattern, lines[0]):
        return partly(f"exit 130, but stderr has {len(lines)} lines: {last_lines(err, 2)}")
    iteration = int(re.fullmatch(pattern, lines[0]).group(1))
    if f"checkpoint-{iteration}" not in runs["checkpoints_after_interrupt"]:
        return partly(f"one line and 130, but no checkpoint of iteration {iteration}: "
                      f"{runs['checkpoints_after_interrupt']}")
    return works(f"SIGINT after iteration {runs['sent_after']} logged: '{lines[0].split(' (')[0]}', exit 130, "
                 f"checkpoint checkpoint-{iteration}")


@expectation("runs", "`--resume` after Ctrl-C continues and ends bit-identical to an uninterrupted run", group="runs")
def resume_bit_identical(walk: Walk) -> Verdict:
    from safetensors.torch import load_file

    runs = walk.cli_runs
    resumed = runs["resumed"]
    if resumed.returncode != 0:
        return fails(f"--resume exit {resumed.returncode}: {last_lines(resumed.stderr)}")
    if "resuming from" not in resumed.stdout:
        return fails("--resume did not say where it resumed from")
    a = load_file(str(runs["straight"] / "model" / "model.safetensors"))
    b = load_file(str(runs["interrupted"] / "model" / "model.safetensors"))
    same_weights = a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)
    same_rows = [untimed(r) for r in metric_rows(runs["straight"])] == \
        [untimed(r) for r in metric_rows(runs["interrupted"])]
    if not same_weights:
        return fails("the resumed run's final weights differ from the uninterrupted run's")
    if not same_rows:
        return partly("final weights identical, but the metrics rows differ")
    where = re.search(r"resuming from \S+ \(iteration \d+\)", resumed.stdout)
    return works(f"{where.group(0).split('/')[-1] if where else 'resumed'}: final weights and all 6 metrics rows "
                 "equal the uninterrupted run's")


@expectation("runs", "`--wandb offline` then `--resume --wandb offline` continues the same W&B run", group="runs")
def wandb_resume_same_run(walk: Walk) -> Verdict:
    runs = walk.cli_runs
    run = runs["interrupted"]
    first = runs["wandb_first"]
    if first is None:
        return fails("no wandb_run.json after the first session")
    first_id = json.loads(first).get("id")
    second_id = json.loads((run / "wandb_run.json").read_text()).get("id")
    offline = sorted(p.name for p in (run / "wandb" / "wandb").glob("offline-run-*")) \
        if (run / "wandb" / "wandb").is_dir() else sorted(p.name for p in run.rglob("offline-run-*") if p.is_dir())
    ids = {name.rsplit("-", 1)[-1] for name in offline}
    if first_id != second_id or len(offline) != 2 or ids != {first_id}:
        return fails(f"ids {first_id} -> {second_id}; offline folders {offline}")
    return works(f"both sessions log to W&B run {first_id} "
                 "(two offline-run folders of that id; `wandb sync` joins them)")


@expectation("runs", "checkpoint weights are safetensors that `safetensors` / transformers load", group="runs")
def checkpoint_safetensors(walk: Walk) -> Verdict:
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    checkpoints = sorted(walk.cli_runs["straight"].glob("checkpoint-[0-9]*"), key=lambda p: int(p.name.split("-")[1]))
    if not checkpoints:
        return fails("no checkpoint")
    newest = checkpoints[-1]
    weights = newest / "model.safetensors"
    if not weights.is_file():
        return fails(f"{newest.name} holds {sorted(p.name for p in newest.iterdir())}")
    state = load_file(str(weights))
    model = AutoModelForCausalLM.from_pretrained(walk.tiny_dir)
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"}
    if unexpected or set(missing) - tied:
        return fails(f"load_state_dict: missing {missing[:3]}, unexpected {unexpected[:3]}")
    try:
        direct_model = AutoModelForCausalLM.from_pretrained(newest)
        import torch

        ids = torch.tensor([[1, 5, 9, 13, 2]])
        with torch.no_grad():
            same = torch.equal(direct_model(ids).logits, model(ids).logits)
        if not same:
            return partly("from_pretrained(checkpoint folder) loads, "
                          "but its logits differ from the checkpoint's weights")
        direct = "and from_pretrained(checkpoint folder) loads them (the same logits)"
    except Exception as error:  # noqa: BLE001
        return partly(f"safetensors.load_file + load_state_dict work, but AutoModelForCausalLM.from_pretrained("
                      f"{newest.name}) fails ({type(error).__name__}: no config.json there, as the HF Trainer's has)")
    return works(f"{newest.name}/model.safetensors loads into the model ({len(state)} tensors) {direct}")


@expectation("runs", "optimizer, scheduler and RNG state load with `torch.load(..., weights_only=True)`", group="runs")
def checkpoint_weights_only(walk: Walk) -> Verdict:
    import torch

    newest = sorted(walk.cli_runs["straight"].glob("checkpoint-[0-9]*"), key=lambda p: int(p.name.split("-")[1]))[-1]
    names = [n for n in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "extra_state.pt") if (newest / n).is_file()]
    if not {"optimizer.pt", "rng_state.pth"} <= set(names):
        return fails(f"{newest.name} holds {sorted(p.name for p in newest.iterdir())}")
    for name in names:
        torch.load(newest / name, weights_only=True)
    pickles = [p.name for p in newest.iterdir() if p.suffix in (".pt", ".pth", ".bin", ".pkl") and p.name not in names]
    if pickles:
        return partly(f"{names} load weights_only, but {pickles} are other pickles")
    return works(f"{', '.join(names)} all load with weights_only=True; trainer_state.json beside them")


@expectation("runs", "no deprecation warnings from our calls (gradient checkpointing, DDP buffers) in a torchrun run",
             group="torchrun")
def no_deprecated_calls(walk: Walk) -> Verdict:
    proc = walk.torchrun["proc"]
    if proc.returncode != 0:
        return fails(f"the torchrun run failed (exit {proc.returncode}): {last_lines(proc.stderr)}")
    warned = [line for line in proc.stderr.splitlines() if "Warning:" in line]
    named = [w for w in warned if re.search(r"gradient_checkpointing_enable|broadcast_buffers", w)]
    ours = [w for w in warned if str(lmgym_home()) in w]
    if named:
        return fails(one_line(named[0]))
    if ours:
        return partly(f"{len(ours)} other warnings from our code: {one_line(ours[0], 140)}")
    others = len(warned)
    return works("no FutureWarning/DeprecationWarning from our code with DDP + --gradient_checkpointing under "
                 f"torchrun (warnings shown; {others} from libraries)")


@expectation("runs",
             "`torchrun --nproc_per_node 2` on the CPU trains one run: one folder, one set of prints, one model",
             group="torchrun")
def torchrun_two_cpu_ranks(walk: Walk) -> Verdict:
    result = walk.torchrun
    proc, run = result["proc"], result["run"]
    if proc.returncode != 0:
        return fails(f"exit {proc.returncode}: {last_lines(proc.stderr)}")
    rows = metric_rows(run)
    prints = proc.stdout.count("held-out accuracy")
    if [r["iteration"] for r in rows] != [1, 2] or prints != 1 or not (run / "model" / "model.safetensors").is_file():
        return fails(f"rows {[r['iteration'] for r in rows]}, accuracy printed {prints}x, model/: "
                     f"{(run / 'model').is_dir()}")
    return works("two gloo ranks: one run folder, 2 rows, accuracy printed once, one model/ (rank 0 writes)")


# ---------------------------------------------------------------------------------------------------------------
# The trained model: Hugging Face conventions


@expectation("export", "the run's model/ loads with plain `AutoModelForCausalLM` and `pipeline('text-generation')`",
             group="runs")
def model_folder_transformers(walk: Walk) -> Verdict:
    from transformers import AutoModelForCausalLM, pipeline

    folder = walk.cli_runs["straight"] / "model"
    AutoModelForCausalLM.from_pretrained(folder)
    generate = pipeline("text-generation", model=str(folder), device="cpu")
    out = generate("What is 2 + 3?", max_new_tokens=4)
    if not out or "generated_text" not in out[0]:
        return fails(f"pipeline returned {out!r}")
    return works(f"from_pretrained and pipeline load {folder.name}/ and generate "
                 f"({sorted(p.name for p in folder.iterdir())[:4]}...)")


@expectation("export", "model/ and model/adapter/ carry model cards (README.md) with YAML metadata, base as a hub id",
             group="runs")
def model_card(walk: Walk) -> Verdict:
    from huggingface_hub import ModelCard

    from lmgym.policies import EMBEDDED_HUB_ID

    def metadata(folder: Path) -> dict:
        path = folder / "README.md"
        if not path.is_file():
            raise FileNotFoundError(f"{folder.name}: no README.md")
        return ModelCard.load(path).data.to_dict()

    run_card = metadata(walk.cli_runs["straight"] / "model")
    adapter_card = metadata(walk.lora_run["adapter"])
    embedded_card = metadata(walk.embedded_adapter)
    problems = []
    if run_card.get("library_name") != "transformers" or not {"lmgym", "grpo"} <= set(run_card.get("tags") or []):
        problems.append(f"model/: library_name {run_card.get('library_name')}, tags {run_card.get('tags')}")
    if "model-index" not in run_card:
        problems.append("model/: no model-index (evaluation results)")
    if adapter_card.get("library_name") != "peft":
        problems.append(f"adapter/: library_name {adapter_card.get('library_name')}")
    if adapter_card.get("base_model") and Path(str(adapter_card["base_model"])).exists():
        problems.append(f"adapter/: base_model is a local path {adapter_card['base_model']}")
    if embedded_card.get("base_model") != EMBEDDED_HUB_ID:
        problems.append(f"adapter over the embedded model: base_model {embedded_card.get('base_model')}")
    if problems:
        return fails("; ".join(problems))
    return works(f"model/: library_name transformers, tags {run_card.get('tags')}, model-index; adapter/: "
                 f"library_name peft; an embedded-base adapter's card: base_model {EMBEDDED_HUB_ID} (a local base is "
                 "left out of base_model, as the Hub requires)")


@expectation("export", "`policy.push_to_hub(repo)` and the `--push_to_hub` setting upload the model folder",
             group="runs")
def push_to_hub(walk: Walk) -> Verdict:
    hub = LocalHub(walk.tmp / "hub-policy")
    policy = walk.tiny_policy()
    policy.push_to_hub("walker/tiny", hub_api=hub)
    pushed = sorted(p.name for p in (hub.root / "walker" / "tiny").iterdir())
    run_hub = walk.lora_run["hub"]
    from_run = sorted(p.name for p in (run_hub.root / "walker" / "tiny-grpo-lora").iterdir()) \
        if (run_hub.root / "walker" / "tiny-grpo-lora").is_dir() else []
    if not {"config.json", "model.safetensors", "README.md"} <= set(pushed):
        return fails(f"policy.push_to_hub uploaded {pushed}")
    if not {"config.json", "README.md", "adapter"} <= set(from_run):
        return fails(f"push_to_hub config uploaded {from_run}")
    return works("policy.push_to_hub and a run with push_to_hub set call create_repo + upload_folder (tested against "
                 "a local stand-in for HfApi; no network here)")


@expectation("export",
             "`AutoPeftModelForCausalLM.from_pretrained(adapter)` loads a LoRA run's adapter (base as a hub id)",
             group="runs")
def adapter_autopeft(walk: Walk) -> Verdict:
    import torch
    from peft import AutoPeftModelForCausalLM

    from lmgym.policies import EMBEDDED_HUB_ID

    adapter = walk.lora_run["adapter"]
    model = AutoPeftModelForCausalLM.from_pretrained(adapter)
    ids = torch.tensor([[1, 2, 3, 4]])
    trained = walk.lora_run["policy"].model
    with torch.no_grad():
        same = torch.allclose(model(input_ids=ids).logits, trained(input_ids=ids).logits, atol=1e-5)
    if not same:
        return fails("AutoPeftModelForCausalLM loads the adapter, but its outputs differ from the trained policy's")
    folder = walk.embedded_adapter  # a LoRA policy over the embedded SmolLM2, saved
    base = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if base != EMBEDDED_HUB_ID:
        return partly(f"local-base adapter loads, but an adapter over the embedded model records {base!r}")
    return works(f"the local-base adapter loads with equal outputs; an adapter over the embedded model records "
                 f"{base} (its download is not tried offline)")


@expectation("export", "`examples/merge_lora.py ADAPTER OUT` gives a plain folder transformers loads, same outputs",
             group="runs")
def merge_lora(walk: Walk) -> Verdict:
    import torch
    from transformers import AutoModelForCausalLM

    merge = load_example("merge_lora")
    out = walk.tmp / "merged"
    with contextlib.redirect_stdout(io.StringIO()):
        merge.main([str(walk.lora_run["adapter"]), str(out)])
    model = AutoModelForCausalLM.from_pretrained(out)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        same = torch.allclose(model(input_ids=ids).logits, walk.lora_run["policy"].model(input_ids=ids).logits,
                              atol=1e-4)
    if (out / "adapter_config.json").exists() or not same:
        return fails(f"merged folder outputs equal: {same}; "
                     f"adapter_config left: {(out / 'adapter_config.json').exists()}")
    return works("merged folder has no peft files and matches the adapter model's logits")


@expectation("export", "evaluate a saved model folder on held-out problems in a few lines", group="runs")
def evaluate_model_folder(walk: Walk) -> Verdict:
    from lmgym.envs import make
    from lmgym.evaluation import evaluate
    from lmgym.policies import HFPolicy

    policy = HFPolicy(str(walk.cli_runs["straight"] / "model"), device="cpu")
    result = evaluate(policy, make("Arithmetic-v0", level=0, split="test"), episodes=4)
    if "accuracy" not in result:
        return fails(f"evaluate returned {sorted(result)}")
    return works(f"lmgym.evaluation.evaluate(HFPolicy(run/model), test env, episodes=4) -> accuracy "
                 f"{result['accuracy']} "
                 f"and {len(result) - 1} more keys")


# ---------------------------------------------------------------------------------------------------------------
# Serving


@expectation("serving",
             "the `openai` client works against the server: models, completions, chat with n, stop, streaming",
             group="server")
def openai_client(walk: Walk) -> Verdict:
    server = walk.server
    client = server["client"]
    model = client.models.list().data[0].id
    completion = client.completions.create(model=model, prompt="What is 2 + 3?", max_tokens=4, n=2, temperature=1.0)
    chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "What is 2 + 3?"}],
                                          max_tokens=4, n=2, temperature=0.7, top_p=0.9, stop=["\n"])
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}],
                                            max_tokens=4, stream=True)
    chunks = list(stream)
    if len(completion.choices) != 2 or len(chat.choices) != 2 or not chunks:
        return fails(f"choices {len(completion.choices)}/{len(chat.choices)}, stream chunks {len(chunks)}")
    if not isinstance(chat.choices[0].message.content, str):
        return fails("chat choice without text")
    return works(f"models.list ({model}), completions n=2, chat n=2 with top_p/stop, stream of {len(chunks)} chunks "
                 "(examples/serve.py's app, --model a folder)")


@expectation("serving", "16 concurrent requests are batched: they share decoding steps (the continuous engine) or "
                        "fewer engine calls than 16 (the batcher's rounds)", group="server")
def server_batches_concurrent(walk: Walk) -> Verdict:
    server = walk.server
    client, batcher = server["client"], server["app"].state.batcher
    engine = getattr(server["app"].state, "engine", None)  # sampling's continuous batching, when the policy has it
    model = client.models.list().data[0].id

    def ask(k: int) -> str:
        reply = client.chat.completions.create(model=model, max_tokens=4, temperature=0,
                                               messages=[{"role": "user", "content": f"What is {k} + {k}?"}])
        return reply.choices[0].message.content

    calls_before, steps_before = batcher.calls, engine.steps if engine else 0
    if engine:
        engine.peak_rows = 0
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(ask, range(16)))
    calls = batcher.calls - calls_before
    if len(answers) != 16:
        return fails(f"{len(answers)} answers")
    if engine:
        steps = engine.steps - steps_before
        if engine.peak_rows < 2 or steps >= 16 * 4:
            return fails(f"16 requests of 4 tokens took {steps} decoding steps, at most {engine.peak_rows} rows a step")
        return works(f"16 concurrent chat requests decoded in {steps} shared steps (up to {engine.peak_rows} rows a "
                     f"step; 64 one at a time)")
    if calls >= 16:
        return fails(f"16 requests took {calls} engine calls")
    return works(f"16 concurrent chat requests answered in {calls} engine calls")


