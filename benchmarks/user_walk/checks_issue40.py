"""The walk's checks of issue 40 ("fits the user's habits, round three"), one or more per point of the issue, each
written against what TRL, transformers, gymnasium and the OpenAI client do. Run as user code in the user's folder
against the installed wheel, like the others."""
from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from walkkit import (
    USER,
    Verdict,
    Walk,
    expectation,
    fails,
    free_port,
    last_lines,
    metric_rows,
    one_line,
    partly,
    vowel_env,
    vowel_share,
    works,
)

ROWS = [{"prompt": "What is 1 + 1?", "answer": "2"}, {"prompt": "What is 2 + 3?", "answer": "5"},
        {"prompt": "What is 4 + 4?", "answer": "8"}, {"prompt": "What is 3 + 1?", "answer": "4"}]
REWARDS = '''def correct(completions, answer, **kwargs):
    return [1.0 if text.strip().endswith(gold) else 0.0 for text, gold in zip(completions, answer)]


def has_digit(completions, **kwargs):
    return [float(any(ch.isdigit() for ch in text)) for text in completions]
'''


def user_data(walk: Walk) -> None:
    """data.jsonl and my_rewards.py in the user's folder, as docs/commands.md shows them."""
    walk.tiny_dir  # noqa: B018  (saved once)
    (USER / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    (USER / "my_rewards.py").write_text(REWARDS, encoding="utf-8")


def lmgym_grpo(walk: Walk, *flags: str, **env: str) -> subprocess.CompletedProcess:
    """`lmgym grpo --model tiny-model --dataset_name data.jsonl --reward_funcs my_rewards.correct FLAGS...`."""
    user_data(walk)
    return walk.run([walk.lmgym_command(), "grpo", "--model", walk.tiny_dir.name, "--dataset_name", "data.jsonl",
                     "--reward_funcs", "my_rewards.correct", *flags], **env)


PROGRESS = re.compile(r"examples/s\]|it/s\]|\d+%\|")  # a library's progress bar (datasets, tqdm), not a message


def one_line_refusal(proc: subprocess.CompletedProcess) -> str | None:
    """The refusal's line when `proc` failed with one stderr line (progress bars aside) and no traceback."""
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip() and not PROGRESS.search(line)]
    ok = proc.returncode != 0 and len(lines) == 1 and "Traceback" not in proc.stderr
    return lines[0] if ok else None


# ---------------------------------------------------------------------------------------------------------------
# 1. TRL configs stay in TRL's names; 2. a datasets.Dataset given to the trainer


@expectation("trl", "`GRPOConfig.from_trl(num_generations=4, per_device_train_batch_size=4, "
                    "gradient_accumulation_steps=2, max_steps=2)` trains (TRL's generation batch), and reward_weights, "
                    "max_prompt_length, log_completions, report_to are known")
def trl_config_from_trl(walk: Walk) -> Verdict:
    from lmgym.algorithms import GRPO, GRPOConfig

    run = walk.tmp / "runs" / "from-trl"
    config = GRPOConfig.from_trl(num_generations=4, per_device_train_batch_size=4, gradient_accumulation_steps=2,
                                 max_steps=2, output_dir=str(run))
    # TRL: a generation batch of 4 x 2 = 8 completions = 2 prompts x 4 generations, one optimizer step each
    batch = (config.prompts_per_iteration, config.samples_per_prompt, config.train_iterations)
    if batch != (2, 4, 2):
        return fails(f"(prompts_per_iteration, samples_per_prompt, train_iterations) = {batch}, TRL's is (2, 4, 2)")
    fast = GRPOConfig.from_trl(num_generations=4, per_device_train_batch_size=4, gradient_accumulation_steps=2,
                               max_steps=2, max_completion_length=6, output_dir=str(run), progress=False,
                               eval_at_start=False, eval_episodes=2)  # the same, shorter answers (the CPU's time)
    rows = GRPO(walk.tiny_policy(), vowel_env(), fast).train()
    trained = [row["iteration"] for row in rows if "loss" in row or "loss_policy" in row]
    if trained != [1, 2]:
        return fails(f"trained iterations {trained}, expected [1, 2]")
    known, unknown = {}, []
    for name, value in (("reward_weights", [1.0]), ("max_prompt_length", 64), ("log_completions", True),
                        ("report_to", "none")):
        try:
            GRPOConfig.from_trl(**{name: value}, output_dir=str(run))
            known[name] = value
        except Exception as error:  # noqa: BLE001
            unknown.append(f"{name}: {type(error).__name__}: {one_line(error, 90)}")
    if unknown:
        return partly(f"trains 2 prompts x 4 for 2 steps without prompts_per_iteration; refused: {'; '.join(unknown)}")
    return works("from_trl(...) derives 2 prompts x 4 generations per step (8 = 4 x 2 / 4), trains 2 steps; "
                 "reward_weights, max_prompt_length, log_completions, report_to='none' all accepted")


@expectation("trl", "a `datasets.Dataset` goes to the trainer as TRL's does: `GRPO(policy, ds, config, "
                    "reward_funcs=[fn])` and `train_dataset=ds`; without reward functions, one line at construction")
def dataset_to_trainer(walk: Walk) -> Verdict:
    import datasets

    from lmgym.algorithms import GRPO

    ds = datasets.Dataset.from_list([{"prompt": "Name a color."}, {"prompt": "Name a fruit."}])
    try:
        GRPO(walk.tiny_policy(), ds, walk.grpo_config(walk.tmp / "runs" / "ds-none"))
        bare = None
    except (TypeError, ValueError) as error:
        bare = str(error)
    if bare is None or "\n" in bare:
        return fails("GRPO(policy, ds, config) without reward functions constructed (it cannot score)"
                     if bare is None else f"refused in {len(bare.splitlines())} lines")
    positional = GRPO(walk.tiny_policy(), ds, walk.grpo_config(walk.tmp / "runs" / "ds-positional"),
                      reward_funcs=[vowel_share]).train()
    keyword = GRPO(walk.tiny_policy(), train_dataset=ds, config=walk.grpo_config(walk.tmp / "runs" / "ds-keyword"),
                   reward_funcs=[vowel_share]).train()
    if len(positional) != 1 or len(keyword) != 1:
        return fails(f"rows: positional {len(positional)}, train_dataset= {len(keyword)}")
    return works(f"both train one iteration; without reward_funcs: {one_line(bare, 110)}")


# ---------------------------------------------------------------------------------------------------------------
# 3. One package beside the user's own packages, one version


@expectation("install", "the user's own `envs/` and `training/` packages keep working beside lmgym: `from envs "
                        "import make` is theirs, `from lmgym.envs import make` is lmgym's, `lmgym.__version__` is the "
                        "wheel's")
def user_packages_beside_lmgym(walk: Walk) -> Verdict:
    import importlib.metadata

    script = ("from envs import make\nimport training\nprint(make('x'))\n"
              "import lmgym\nfrom lmgym.envs import make as lmgym_make\nobs, _ = lmgym_make('Arithmetic-v0').reset("
              "seed=0)\nimport envs\nprint(envs.__file__, training.__file__, lmgym.__version__, type(obs).__name__)\n")
    (USER / "mine.py").write_text(script, encoding="utf-8")
    proc = walk.run([sys.executable, "mine.py"])
    if proc.returncode != 0:
        return fails(f"exit {proc.returncode}: {last_lines(proc.stderr)}")
    first, second = proc.stdout.strip().splitlines()[-2:]
    envs_file, training_file, version, obs = second.split()
    wheel_version = Path(os.environ["WALK_WHEEL"]).name.split("-")[1]
    problems = []
    if first != "user env x" or Path(envs_file).resolve() != USER / "envs" / "__init__.py":
        problems.append(f"`from envs import make` gave {first!r} ({envs_file})")
    if Path(training_file).resolve() != USER / "training" / "__init__.py":
        problems.append(f"`import training` is {training_file}")
    if obs != "str":
        problems.append(f"lmgym's Arithmetic-v0 reset to a {obs}")
    if not version == wheel_version == importlib.metadata.version("lmgym"):
        problems.append(f"lmgym.__version__ {version}, wheel {wheel_version}, metadata "
                        f"{importlib.metadata.version('lmgym')}")
    if problems:
        return fails("; ".join(problems))
    return works(f"the user's envs/ and training/ win in their folder, lmgym's envs make Arithmetic-v0 beside them; "
                 f"lmgym.__version__ {version} = the wheel's = importlib.metadata's")


@expectation("install", "the wheel installs one top-level package, `lmgym`, as trl, verl and gymnasium install one")
def wheel_top_level_names(walk: Walk) -> Verdict:
    names = zipfile.ZipFile(os.environ["WALK_WHEEL"]).namelist()
    top = sorted({name.split("/")[0] for name in names if "/" in name and ".dist-info" not in name.split("/")[0]})
    if top == ["lmgym"]:
        return works("the wheel holds lmgym/ only")
    others = [name for name in top if name != "lmgym"]
    return partly(f"lmgym/ plus {len(others)} more top-level packages ({', '.join(others)}): 0.2.0's names, kept "
                  "one release as shims that warn; a user's folder shadows them (check above), but an installed "
                  "package of one of these names would collide with them in site-packages")


# ---------------------------------------------------------------------------------------------------------------
# 4. The installed command


@expectation("cli", "`lmgym grpo --model <folder> --dataset_name data.jsonl --reward_funcs my_rewards.correct "
                    "--max_steps 2` trains as `trl grpo` does, and `python -m lmgym --help` lists the commands")
def lmgym_grpo_command(walk: Walk) -> Verdict:
    start = time.perf_counter()
    proc = lmgym_grpo(walk, "--max_steps", "2")  # as written: every other setting is the command's default
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        return fails(f"exit {proc.returncode}: {last_lines(proc.stderr)}")
    run = USER / "runs" / "grpo"
    rows = [row for row in metric_rows(run) if "loss" in row or "loss_policy" in row]
    if len(rows) != 2 or not (run / "model" / "model.safetensors").is_file():
        return fails(f"{len(rows)} training rows in {run.relative_to(USER)}/metrics.jsonl, model/: "
                     f"{(run / 'model').is_dir()}")
    helped = walk.run([sys.executable, "-m", "lmgym", "--help"])
    missing = [c for c in ("grpo", "ppo", "reinforce", "sft", "dpo", "serve", "eval") if c not in helped.stdout]
    if helped.returncode != 0 or missing:
        return partly(f"lmgym grpo trains, but `python -m lmgym --help`: exit {helped.returncode}, missing {missing}")
    return works(f"2 steps in {seconds:.0f} s into runs/grpo/ (the default output_dir; model/ written); "
                 "`python -m lmgym --help` lists grpo, ppo, reinforce, sft, dpo, serve, eval")


# ---------------------------------------------------------------------------------------------------------------
# 5. report_to, the completions table, TRL's metric names


def tensorboard_tags(run: Path) -> tuple[list[Path], set[str]]:
    """The event files under `run` and the scalar and text tags they hold."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(run.rglob("events.out.tfevents.*"))
    tags: set[str] = set()
    for folder in {path.parent for path in files}:
        accumulator = EventAccumulator(str(folder))
        accumulator.Reload()
        for names in accumulator.Tags().values():
            if isinstance(names, list):
                tags.update(names)
    return files, tags


@expectation("runs", "`lmgym grpo ... --report_to tensorboard --log_completions` writes event files with TRL's "
                     "`rewards/<fn>/mean`, a completions table, and metrics.jsonl in TRL's names", group="trackers")
def report_to_tensorboard(walk: Walk) -> Verdict:
    run = walk.tmp / "runs" / "tensorboard"
    proc = lmgym_grpo(walk, "--max_steps", "2", "--num_generations", "2", "--per_device_train_batch_size", "2",
                      "--max_completion_length", "6", "--report_to", "tensorboard", "--log_completions",
                      "--output_dir", str(run), "--no-progress")
    if proc.returncode != 0:
        return fails(f"exit {proc.returncode}: {last_lines(proc.stderr, 1)}")
    files, tags = tensorboard_tags(run)
    rows = metric_rows(run)
    table = [json.loads(line) for line in (run / "completions.jsonl").read_text().splitlines()] \
        if (run / "completions.jsonl").is_file() else []
    gaps = []
    if not files:
        gaps.append("no events.out.tfevents file")
    elif not any(tag.endswith("rewards/correct/mean") for tag in tags):
        gaps.append(f"no rewards/correct/mean among the event tags ({sorted(tags)[:4]}...)")
    if not any("rewards/correct/mean" in row for row in rows):
        gaps.append(f"metrics.jsonl has no rewards/correct/mean (reward keys: "
                    f"{sorted(k for k in rows[-1] if 'reward' in k)[:3] if rows else []})")
    if not table or not {"prompt", "completion"} <= set(table[0]):
        gaps.append(f"completions.jsonl rows: {len(table)}, keys {sorted(table[0])[:5] if table else []}")
    if gaps:
        return (fails if not files else partly)("; ".join(gaps))
    tb_table = "and in the event file" if any("completion" in tag for tag in tags) else "(not in the event file)"
    return works(f"{len(files)} event file(s) with {len(tags)} tags incl. rewards/correct/mean; completions table "
                 f"of {len(table)} rows in completions.jsonl {tb_table}; metrics.jsonl in TRL's names")


def mlflow_metric_names(run_dir: Path) -> set[str]:
    """Metric names in the MLflow store the docs name: MLFLOW_TRACKING_URI when set, else `<output_dir>/mlruns`
    (read as a user would: `mlflow ui --backend-store-uri <output_dir>/mlruns`)."""
    from mlflow.tracking import MlflowClient

    uri = os.environ.get("MLFLOW_TRACKING_URI") or (run_dir / "mlruns").resolve().as_uri()
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow 3 keeps the file store behind this flag
    client = MlflowClient(tracking_uri=uri)
    names: set[str] = set()
    for experiment in client.search_experiments():
        for run in client.search_runs([experiment.experiment_id]):
            names.update(run.data.metrics)
    return names


def trackio_strings(folder: Path) -> str:
    """Every text value of trackio's local databases under `folder`, joined (where its metric names are)."""
    found = []
    for db in folder.rglob("*.db"):
        with sqlite3.connect(db) as connection:
            tables = [r[0] for r in connection.execute("select name from sqlite_master where type='table'")]
            for table in tables:
                for row in connection.execute(f'select * from "{table}"'):  # noqa: S608 (its own table names)
                    found.extend(value if isinstance(value, str) else value.decode("utf-8", "replace")
                                 for value in row if isinstance(value, (str, bytes)))  # metrics: JSON blobs
    return "\n".join(found)


@expectation("runs", "`report_to=['mlflow', 'trackio']` with `log_completions=True` logs TRL's metric names to a "
                     "local MLflow store and trackio's local database", group="trackers")
def report_to_mlflow_trackio(walk: Walk) -> Verdict:
    from lmgym.algorithms import GRPO

    run_dir = walk.tmp / "runs" / "mlflow-trackio"
    try:
        config = walk.grpo_config(run_dir, train_iterations=2,
                                  report_to=("mlflow", "trackio"), log_completions=True)
    except Exception as error:  # noqa: BLE001
        return fails(f"{type(error).__name__}: {one_line(error, 200)}")
    GRPO(walk.tiny_policy(), vowel_env(), config).train()
    name = "rewards/vowel_share/mean"
    in_mlflow = mlflow_metric_names(run_dir)
    in_trackio = trackio_strings(Path(os.environ.get("TRACKIO_DIR", USER / "trackio")))
    gaps = []
    if not any(metric.endswith(name) for metric in in_mlflow):
        gaps.append(f"MLflow: {len(in_mlflow)} metric names, no {name}")
    if name not in in_trackio:
        gaps.append(f"trackio: no {name} in its local database" if in_trackio else "trackio: no local database")
    if len(gaps) == 2:
        return fails("; ".join(gaps))
    if gaps:
        return partly(gaps[0])
    return works(f"{name} (and {len(in_mlflow) - 1} more) in the local MLflow store, and in trackio's database")


# ---------------------------------------------------------------------------------------------------------------
# 6. A server that streams tokens and batches continuously


def start_server(walk: Walk) -> str:
    """`lmgym serve --port P` (the embedded model, every other setting its default) in the user's folder; its
    base URL once /v1/models answers."""
    import httpx

    port = free_port()
    proc = subprocess.Popen([walk.lmgym_command(), "serve", "--port", str(port)], cwd=USER, env=walk.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    walk._processes = [*getattr(walk, "_processes", []), proc]
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + walk.timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"lmgym serve exited {proc.returncode}: {last_lines(proc.stderr.read())}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return url
        except httpx.HTTPError:
            time.sleep(0.5)
    raise RuntimeError(f"lmgym serve did not answer within {walk.timeout} s")


def served(walk: Walk) -> dict[str, Any]:
    """The server, its openai client, and the measurements the server checks share (made once)."""
    if hasattr(walk, "_served"):
        return walk._served
    import openai

    client = openai.OpenAI(base_url=start_server(walk), api_key="unused", max_retries=0, timeout=600)
    model = client.models.list().data[0].id
    walk._served = {"client": client, "model": model}
    return walk._served


def chat(client, model: str, k: int, max_tokens: int) -> tuple[int, float, int | None]:
    """One greedy chat: (completion tokens, seconds, HTTP error status or None)."""
    import openai

    start = time.perf_counter()
    try:
        reply = client.chat.completions.create(model=model, max_tokens=max_tokens, temperature=0,
                                               messages=[{"role": "user", "content": f"Count from {k} to {k + 20}."}])
        return reply.usage.completion_tokens, time.perf_counter() - start, None
    except openai.APIStatusError as error:
        return 0, time.perf_counter() - start, error.status_code


@expectation("serving", "`lmgym serve` streams tokens: the first SSE content chunk arrives well before the end "
                        "(<= 1 s on an idle machine), each chunk a few tokens", group="server40")
def server_streams_tokens(walk: Walk) -> Verdict:
    state = served(walk)
    client, model = state["client"], state["model"]
    chat(client, model, 0, 4)  # warm-up
    start = time.perf_counter()
    stream = client.chat.completions.create(model=model, max_tokens=48, temperature=0, stream=True,
                                            messages=[{"role": "user", "content": "Count from 1 to 30."}])
    arrivals = [time.perf_counter() - start for chunk in stream
                if chunk.choices and chunk.choices[0].delta and chunk.choices[0].delta.content]
    total = time.perf_counter() - start
    if not arrivals:
        return fails(f"no content chunk in {total:.1f} s")
    first = arrivals[0]
    summary = f"first content chunk at {first:.2f} s of {total:.2f} s, {len(arrivals)} content chunks"
    if len(arrivals) < 4 or first > total / 2:
        return fails(f"{summary}: the answer arrives whole")
    if first > 1.0:
        return partly(f"{summary}: streams, but the first token after 1 s (a shared 2-core machine)")
    return works(summary)


PAIRS = 3  # sequential-then-concurrent pairs; the median pair is reported, as benchmarks/serve_stream.py does


def concurrency(walk: Walk) -> dict[str, Any]:
    """8 greedy chats one after the other, then the same 8 at once (equal tokens: greedy, same prompts), PAIRS
    times; the pair of median speed-up, and every chat's status."""
    state = served(walk)
    if "concurrency" not in state:
        client, model = state["client"], state["model"]
        chat(client, model, 0, 4)  # warm-up
        pairs = []
        for _ in range(PAIRS):
            start = time.perf_counter()
            sequential = [chat(client, model, k, 24) for k in range(8)]
            sequential_s = time.perf_counter() - start
            start = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                concurrent = list(pool.map(lambda k: chat(client, model, k, 24), range(8)))
            pairs.append({"sequential": sequential, "sequential_s": sequential_s, "concurrent": concurrent,
                          "concurrent_s": time.perf_counter() - start})
        pairs.sort(key=lambda pair: pair["sequential_s"] / pair["concurrent_s"])
        state["concurrency"] = {**pairs[len(pairs) // 2],
                                "speedups": [round(p["sequential_s"] / p["concurrent_s"], 2) for p in pairs],
                                "all_chats": [c for p in pairs for c in p["sequential"] + p["concurrent"]]}
    return state["concurrency"]


@expectation("serving", "8 concurrent chats finish >= 3x faster than the same 8 one after the other (equal tokens), "
                        "as vLLM's continuous batching does", group="server40")
def server_concurrent_speedup(walk: Walk) -> Verdict:
    result = concurrency(walk)
    tokens_seq = sum(t for t, _, _ in result["sequential"])
    tokens_conc = sum(t for t, _, _ in result["concurrent"])
    speedup = result["sequential_s"] / result["concurrent_s"]
    summary = (f"median of {PAIRS} pairs (speed-ups {result['speedups']}): 8 sequential {result['sequential_s']:.1f} s "
               f"({tokens_seq} tokens), 8 concurrent {result['concurrent_s']:.1f} s ({tokens_conc} tokens): "
               f"{speedup:.2f}x")
    if tokens_seq != tokens_conc:
        return partly(f"{summary}; the token counts differ")
    if speedup >= 3:
        return works(summary)
    return (partly if speedup >= 1.5 else fails)(f"{summary}, below 3x")


@expectation("serving", "8 concurrent chats at max_tokens 24 get no 504 at the server's default timeout",
             group="server40")
def server_no_timeouts(walk: Walk) -> Verdict:
    result = concurrency(walk)
    chats = result["all_chats"]
    statuses = [status for _, _, status in chats if status is not None]
    if statuses:
        return fails(f"{statuses.count(504)} x 504 and {len(statuses) - statuses.count(504)} other errors of "
                     f"{len(chats)} chats")
    slowest = max(seconds for _, seconds, _ in result["concurrent"])
    return works(f"{len(chats)} chats ({PAIRS} x 8 sequential, {PAIRS} x 8 concurrent) all answered, 0 x 504; the "
                 f"slowest concurrent one of the median pair {slowest:.1f} s")


# ---------------------------------------------------------------------------------------------------------------
# 7. push_to_hub checked before training


@expectation("export", "`--push_to_hub` without a token (or offline) is refused before training, in one line "
                       "without a traceback")
def push_to_hub_preflight(walk: Walk) -> Verdict:
    run = walk.tmp / "runs" / "push"
    start = time.perf_counter()
    proc = lmgym_grpo(walk, "--max_steps", "2", "--push_to_hub", "walker/tiny-grpo", "--output_dir", str(run))
    seconds = time.perf_counter() - start
    line = one_line_refusal(proc)
    trained = [row for row in metric_rows(run) if "loss" in row or "loss_policy" in row]
    if proc.returncode == 0:
        return fails("trained and exited 0 with no token and HF_HUB_OFFLINE=1")
    if trained:
        return fails(f"refused only after training {len(trained)} iterations: {last_lines(proc.stderr, 1)}")
    if line is None:
        return partly(f"refused before training, but stderr has {len(proc.stderr.splitlines())} lines: "
                      f"{last_lines(proc.stderr, 4)}")
    bars = len(proc.stderr.strip().splitlines()) - 1
    return works(f"exit {proc.returncode} after {seconds:.0f} s, no iteration run: {one_line(line, 140)}"
                 + (f" ({bars} progress-bar lines of datasets before it)" if bars else ""))


# ---------------------------------------------------------------------------------------------------------------
# 8. HF-shaped checkpoints


def hf_runs(walk: Walk) -> dict[str, Any]:
    """Three iterations straight (a checkpoint each, push_to_hub as a dry run), and the same run stopped after two
    then continued with `train(resume_from_checkpoint=True)`."""
    if hasattr(walk, "_hf_runs"):
        return walk._hf_runs
    from lmgym.algorithms import GRPO

    def config(run: Path, iterations: int):
        return walk.grpo_config(run, train_iterations=iterations, save_every=1, seed=5,
                                push_to_hub="walker/tiny-grpo", hub_dry_run=True)

    straight, resumed = walk.tmp / "runs" / "hf-straight", walk.tmp / "runs" / "hf-resumed"
    policy = walk.tiny_policy()
    trainer = GRPO(policy, vowel_env(), config(straight, 3))
    trainer.train()
    trainer.save_model()  # as with TRL's trainer: model/, its card, and (a dry run here) the push
    GRPO(walk.tiny_policy(), vowel_env(), config(resumed, 2)).train()
    again = walk.tiny_policy()
    rows = GRPO(again, vowel_env(), config(resumed, 3)).train(resume_from_checkpoint=True)
    same = all(bool((a == b).all()) for a, b in zip(policy.model.parameters(), again.model.parameters()))
    walk._hf_runs = {"straight": straight, "resumed": resumed, "same": same, "rows": rows}
    return walk._hf_runs


@expectation("runs", "`output_dir/checkpoint-N/` loads with AutoTokenizer and AutoModelForCausalLM, its "
                     "trainer_state.json has global_step and log_history, files are 0644", group="hf_checkpoints")
def checkpoint_n_hf_shaped(walk: Walk) -> Verdict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = hf_runs(walk)["straight"]
    folder = run / "checkpoint-2"
    if not folder.is_dir():
        return fails(f"no checkpoint-2 in {sorted(p.name for p in run.iterdir())}")
    AutoTokenizer.from_pretrained(folder)
    AutoModelForCausalLM.from_pretrained(folder)
    state = json.loads((folder / "trainer_state.json").read_text())
    if state.get("global_step") != 2 or not isinstance(state.get("log_history"), list) or not state["log_history"]:
        return fails(f"trainer_state.json: global_step {state.get('global_step')}, log_history "
                     f"{type(state.get('log_history')).__name__}")
    modes = {p.relative_to(run).as_posix(): oct(p.stat().st_mode & 0o777) for folder in (folder, run / "model")
             for p in folder.rglob("*") if p.is_file() and p.stat().st_mode & 0o777 != 0o644}
    if modes:
        return partly(f"loads, trainer_state has HF's keys, but not 0644: {dict(list(modes.items())[:3])}")
    return works(f"checkpoint-2 loads with AutoTokenizer + AutoModelForCausalLM; trainer_state.json global_step 2, "
                 f"{len(state['log_history'])} log_history entries; every file of checkpoint-2/ and model/ 0644")


@expectation("runs", "`train(resume_from_checkpoint=True)` continues from the newest checkpoint-N and ends "
                     "bit-identical to an uninterrupted run", group="hf_checkpoints")
def resume_from_checkpoint_true(walk: Walk) -> Verdict:
    runs = hf_runs(walk)
    iterations = [row["iteration"] for row in runs["rows"] if "loss" in row or "loss_policy" in row]
    if not runs["same"]:
        return fails(f"resumed (iterations run: {iterations}), but the final weights differ from the straight run's")
    return works(f"resumed from checkpoint-2, ran iteration {iterations[-1] if iterations else '?'}; final weights "
                 "bit-identical to 3 iterations straight")


@expectation("export", "the model card names the hub repo, holds no local path or placeholder, and passes "
                       "huggingface_hub's ModelCard checks", group="hf_checkpoints")
def model_card_hub_ready(walk: Walk) -> Verdict:
    from huggingface_hub import ModelCard

    card_path = hf_runs(walk)["straight"] / "model" / "README.md"
    text = card_path.read_text(encoding="utf-8")
    local = [marker for marker in (str(USER), "/tmp/", str(Path.home()), "path/or/repo") if marker in text]
    if local:
        return fails(f"model/README.md holds {local}")
    if "walker/tiny-grpo" not in text:
        return partly("no local paths, but the card does not name the repo walker/tiny-grpo")
    card = ModelCard.load(card_path)
    data = card.data.to_dict()
    try:
        card.validate()
        validated = "ModelCard.validate passes"
    except Exception as error:  # noqa: BLE001 - offline: validate posts the YAML to the hub
        offline = re.search(r"offline|connect|resolve|network", f"{type(error).__name__} {error}", re.I)
        if not offline:
            return fails(f"ModelCard.validate: {one_line(error, 160)}")
        validated = "ModelCard.validate needs the hub (offline here: not run)"
    return works(f"names walker/tiny-grpo, no local path; metadata parses ({', '.join(sorted(data)[:4])}); "
                 f"{validated}")
