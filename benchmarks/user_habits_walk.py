"""The user-habits walk (issue 27): 38 things an engineer who already uses TRL, transformers, peft, gymnasium and
wandb tries on a new toolkit, each tried for real and graded works / partly / fails with a one-line reason.

    python benchmarks/user_habits_walk.py                  # all 38; a table, and the JSON below
    python benchmarks/user_habits_walk.py --only cli_help --only ctrl_c_one_line_130
    python benchmarks/user_habits_walk.py --list

Everything runs offline on the CPU with the tiny model built in code (`lmgym.policies.build_tiny_model`, saved to a
temporary folder where a path is needed); the embedded SmolLM2 is loaded once, for the one check that is about
it (the base an adapter over it records). Subprocesses are used only where the expectation is about a command
line (flags, --help, Ctrl-C, torchrun, --resume, pip, a fresh interpreter). `works` means the behaviour is what
such a user expects; `partly` states the gap; `fails` says what happened. An exception in a check is `fails`
with its first line. Results: statics/results/user_habits_walk/results.json (or --out).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))  # the examples it loads import their `common`
DEFAULT_OUT = ROOT / "statics" / "results" / "user_habits_walk" / "results.json"
WORKS, PARTLY, FAILS = "works", "partly", "fails"
QUICKSTART = ROOT / "examples" / "quickstart.py"


@dataclass(frozen=True)
class Verdict:
    status: str  # works | partly | fails
    reason: str  # one line; for partly, the gap


@dataclass(frozen=True)
class Expectation:
    name: str
    area: str
    expects: str  # what the user expects, one line
    check: Callable[[Walk], Verdict]


EXPECTATIONS: list[Expectation] = []


def expectation(area: str, expects: str):
    """Register `fn(walk) -> Verdict` as one expectation of the walk, named after the function."""
    def register(fn: Callable[[Walk], Verdict]) -> Callable[[Walk], Verdict]:
        EXPECTATIONS.append(Expectation(fn.__name__, area, expects, fn))
        return fn
    return register


def works(reason: str) -> Verdict:
    return Verdict(WORKS, reason)


def partly(reason: str) -> Verdict:
    return Verdict(PARTLY, reason)


def fails(reason: str) -> Verdict:
    return Verdict(FAILS, reason)


def one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def last_lines(text: str, n: int = 3) -> str:
    return one_line(" | ".join(line for line in text.strip().splitlines()[-n:]))


# ---------------------------------------------------------------------------------------------------------------
# Shared resources, built once and only when a check needs them


class LocalHub:
    """Stands in for `huggingface_hub.HfApi` (create_repo + upload_folder), copying into a local folder."""

    def __init__(self, root: Path):
        self.root, self.created = root, []

    def create_repo(self, repo_id: str, **kwargs: Any) -> str:
        self.created.append(repo_id)
        (self.root / repo_id).mkdir(parents=True, exist_ok=True)
        return repo_id

    def upload_folder(self, *, repo_id: str, folder_path: str, **kwargs: Any) -> str:
        shutil.copytree(folder_path, self.root / repo_id, dirs_exist_ok=True)
        return f"local://{repo_id}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric_rows(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def untimed(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith(("time_", "tokens_per_second"))}


# the run every CLI expectation shares: a YAML file below the flags, the tiny model, Arithmetic level 0
CLI_YAML = """\
train_iterations: 6
prompts_per_iteration: 2
samples_per_prompt: 2
max_new_tokens: 4
eval_episodes: 2
eval_every: 0
micro_batch_size: 4
eval_at_start: false
save_every: 2
learning_rate: 1.0e-3
seed: 3
"""
CLI_LEARNING_RATE = 3e-3  # the flag that overrides the YAML's learning_rate


class Walk:
    """The temporary folder and the resources several expectations share (built lazily, once)."""

    def __init__(self, tmp: Path, timeout: int):
        self.tmp, self.timeout = tmp, timeout
        import torch

        torch.set_num_threads(2)

    # -- environment of subprocesses ---------------------------------------------------------------------------
    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2",
               "OMP_WAIT_POLICY": "PASSIVE", "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
               "WANDB_MODE": "disabled", "WANDB_SILENT": "true"}
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "RLGYM_TRACEBACK"):
            env.pop(name, None)
        env.update(extra)
        return env

    def run(self, args: list[str], **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=self.tmp, env=self.env(**env), capture_output=True, text=True,
                              timeout=self.timeout)

    def quickstart(self, *flags: str) -> subprocess.CompletedProcess:
        return self.run([sys.executable, str(QUICKSTART), *flags])

    # -- models ----------------------------------------------------------------------------------------------
    @functools.cached_property
    def tiny_dir(self) -> Path:
        """The tiny model and its tokenizer saved as a Hugging Face folder (what `--model PATH` takes)."""
        from lmgym.policies import build_tiny_model, build_tiny_tokenizer

        folder = self.tmp / "tiny"
        tokenizer = build_tiny_tokenizer()
        build_tiny_model(tokenizer, seed=0).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return folder

    def tiny_policy(self, seed: int = 0):
        from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

        tokenizer = build_tiny_tokenizer()
        return HFPolicy(build_tiny_model(tokenizer, seed=seed), tokenizer, device="cpu")

    @staticmethod
    def grpo_config(output_dir: Path, **overrides: Any):
        from lmgym.algorithms import GRPOConfig

        values = dict(train_iterations=1, prompts_per_iteration=2, samples_per_prompt=3, max_new_tokens=6,
                      eval_episodes=2, eval_every=0, micro_batch_size=6, learning_rate=1e-2,
                      output_dir=str(output_dir), progress=False, seed=0, eval_at_start=False)
        values.update(overrides)
        return GRPOConfig(**values)

    # -- the command-line runs -------------------------------------------------------------------------------
    @functools.cached_property
    def cli_yaml(self) -> Path:
        path = self.tmp / "walk.yaml"
        path.write_text(CLI_YAML)
        return path

    def cli_flags(self, run: Path) -> list[str]:
        return ["--preset", "cpu", "--model", str(self.tiny_dir), "--level", "0", "--no-progress",
                "--config", str(self.cli_yaml), "--learning_rate", str(CLI_LEARNING_RATE), "--output_dir", str(run)]

    @functools.cached_property
    def cli_runs(self) -> dict[str, Any]:
        """One uninterrupted quickstart run, and the same run Ctrl-C'd (a real SIGINT sent from outside once
        its first iteration is logged) with --wandb offline, then resumed with --resume --wandb offline. The
        two start together (two processes, fixed thread counts: the results do not depend on it)."""
        straight, broken = self.tmp / "runs" / "straight", self.tmp / "runs" / "interrupted"
        wandb_env = {"WANDB_MODE": "offline", "WANDB_DIR": str(self.tmp / "wandb-dir"),
                     "WANDB_CACHE_DIR": str(self.tmp / "wandb-cache"),
                     "WANDB_CONFIG_DIR": str(self.tmp / "wandb-config")}
        self.tiny_dir  # noqa: B018  (saved before the processes start)
        first = subprocess.Popen([sys.executable, str(QUICKSTART), *self.cli_flags(straight)], cwd=self.tmp,
                                 env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        second = subprocess.Popen([sys.executable, str(QUICKSTART), *self.cli_flags(broken), "--wandb", "offline"],
                                  cwd=self.tmp, env=self.env(**wandb_env), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        sent_after: int | None = None
        deadline = time.monotonic() + self.timeout
        while second.poll() is None and time.monotonic() < deadline:
            logged = metric_rows(broken) if (broken / "metrics.jsonl").is_file() else []
            if logged:
                sent_after = logged[-1]["iteration"]
                second.send_signal(signal.SIGINT)  # what Ctrl-C in the terminal sends
                break
            time.sleep(0.05)
        out2, err2 = second.communicate(timeout=self.timeout)
        out1, err1 = first.communicate(timeout=self.timeout)
        interrupted_files = sorted(p.name for p in broken.glob("checkpoint-*")) if broken.is_dir() else []
        wandb_first = (broken / "wandb_run.json").read_text() if (broken / "wandb_run.json").is_file() else None
        resumed = self.run([sys.executable, str(QUICKSTART), *self.cli_flags(broken), "--wandb", "offline",
                            "--resume"], **wandb_env)
        return {"straight": straight, "interrupted": broken, "straight_proc": (first.returncode, out1, err1),
                "interrupt_proc": (second.returncode, out2, err2), "sent_after": sent_after,
                "checkpoints_after_interrupt": interrupted_files, "wandb_first": wandb_first, "resumed": resumed}

    @functools.cached_property
    def torchrun(self) -> dict[str, Any]:
        """The quickstart under torchrun, two CPU ranks (gloo), DDP and gradient checkpointing on, with
        FutureWarning and DeprecationWarning shown."""
        run = self.tmp / "runs" / "torchrun"
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
                   "--master_addr", "127.0.0.1", "--master_port", str(free_port()), str(QUICKSTART),
                   *self.cli_flags(run), "--train_iterations", "2", "--gradient_checkpointing",
                   "--data_parallel", "ddp"]
        proc = self.run(command, OMP_NUM_THREADS="1",
                        PYTHONWARNINGS="default::FutureWarning,default::DeprecationWarning")
        return {"run": run, "proc": proc}

    # -- in-process runs ---------------------------------------------------------------------------------------
    @functools.cached_property
    def trl_run(self) -> dict[str, Any]:
        """GRPO on a `datasets.Dataset` env with a TRL-style reward that records every call."""
        import datasets

        from lmgym.algorithms import GRPO
        from lmgym.envs import make

        calls: list[dict] = []

        def spy(prompts, completions, completion_ids, topic, **kwargs):
            calls.append({"prompts": prompts, "completions": completions, "completion_ids": completion_ids,
                          "topic": topic, **kwargs})
            return vowel_share(completions)

        rows = [{"prompt": "Name a color.", "answer": "red", "topic": "colors"},
                {"prompt": "What is 2+2?", "answer": "4", "topic": "sums"},
                {"prompt": "Name a fruit.", "answer": "fig", "topic": "fruits"}]
        dataset = datasets.Dataset.from_list(rows)
        policy = self.tiny_policy()
        before = [p.detach().clone() for p in policy.model.parameters()]
        env = make("Dataset-v0", dataset=dataset, reward_fns=[spy])
        out = GRPO(policy, env, self.grpo_config(self.tmp / "runs" / "trl", train_iterations=2)).train()
        changed = any(not bool((a == b).all()) for a, b in zip(before, policy.model.parameters()))
        return {"rows": out, "calls": calls, "changed": changed, "policy": policy}

    @functools.cached_property
    def lora_run(self) -> dict[str, Any]:
        """A LoRA GRPO run over the tiny model's folder (a local base), saved as a run's model/ and adapter."""
        from lmgym.algorithms import GRPO
        from lmgym.policies import HFPolicy, LoraSettings

        policy = HFPolicy(str(self.tiny_dir), device="cpu", lora=LoraSettings(r=4, alpha=8))
        run = self.tmp / "runs" / "lora"
        hub = LocalHub(self.tmp / "hub")
        algo = GRPO(policy, vowel_env(), self.grpo_config(run, push_to_hub="walker/tiny-grpo-lora",
                                                            learning_rate=5e-2))
        algo.train()
        folder = algo.save_model(hub_api=hub)
        return {"policy": policy, "run": run, "model": folder, "adapter": folder / "adapter", "hub": hub}

    @functools.cached_property
    def embedded_adapter(self) -> Path:
        """A LoRA policy over the embedded SmolLM2 (its cached folder), saved as an adapter folder."""
        from lmgym.policies import HFPolicy, LoraSettings

        folder = self.tmp / "embedded-adapter"
        HFPolicy(lora=LoraSettings(r=4, alpha=8), device="cpu").save(folder)
        return folder

    @functools.cached_property
    def server(self) -> dict[str, Any]:
        """examples/serve.py's app (--model the tiny folder) under uvicorn on a free port, and an openai client."""
        import openai
        import uvicorn

        serve = load_example("serve")
        app = serve.build_app(serve.build_parser().parse_args(["--model", str(self.tiny_dir),
                                                                 "--batch_window_ms", "20"]))
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        waited = threading.Event()
        while not server.started and thread.is_alive():
            waited.wait(0.02)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}/v1", api_key="unused",
                               max_retries=0, timeout=120)
        self._server = (server, thread, sock)
        return {"app": app, "client": client}

    def close(self) -> None:
        if hasattr(self, "_server"):
            server, thread, sock = self._server
            server.should_exit = True
            thread.join(timeout=30)
            sock.close()


def vowel_share(completions, **kwargs) -> list[float]:
    """A TRL-style reward that varies between samples of the tiny model (so updates are not zero)."""
    texts = [c[0]["content"] if isinstance(c, list) else str(c) for c in completions]
    return [sum(ch in "aeiou" for ch in t) / max(len(t), 1) for t in texts]


def vowel_env():
    from lmgym.envs import make

    return make("Dataset-v0", dataset=[{"prompt": "Name a color."}, {"prompt": "Name a fruit."}],
                reward_fns=[vowel_share])


def load_example(name: str):
    """examples/<name>.py as a module (the examples are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"walk_example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses defined in it look their module up
    spec.loader.exec_module(module)
    return module


def runnable_block(page: str, marker: str) -> str:
    """The code of the fenced python block of `page` that contains `marker`."""
    text = (ROOT / page).read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        if marker in block:
            return block
    raise LookupError(f"{page}: no python block contains {marker!r}")


@contextlib.contextmanager
def working_dir(path: Path):
    old = Path.cwd()
    path.mkdir(parents=True, exist_ok=True)
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


# ---------------------------------------------------------------------------------------------------------------
# Install and find environments


@expectation("install", "`pip install -e .` installs the toolkit so `import envs, algorithms` works outside the repo")
def pip_install_editable(walk: Walk) -> Verdict:
    prefix = walk.tmp / "prefix"
    pip = walk.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-input",
                    "--disable-pip-version-check", "-q", "--prefix", str(prefix), "-e", str(ROOT)])
    if pip.returncode != 0:
        return fails(f"pip exit {pip.returncode}: {last_lines(pip.stderr)}")
    site_dirs = [p for p in prefix.glob("lib/python*/site-packages")]
    if not site_dirs:
        return fails("pip wrote no site-packages under the prefix")
    env = {k: v for k, v in walk.env().items() if k != "PYTHONPATH"}
    outside = walk.tmp / "elsewhere"
    outside.mkdir(exist_ok=True)
    code = (f"import site; site.addsitedir({str(site_dirs[0])!r}); import envs, algorithms, policies, serving; "
            "from algorithms import GRPO; print(envs.__file__)")
    probe = subprocess.run([sys.executable, "-c", code], cwd=outside, env=env, capture_output=True, text=True,
                           timeout=walk.timeout)
    if probe.returncode != 0:
        return fails(f"import after install: {last_lines(probe.stderr)}")
    where = probe.stdout.strip()
    if not where.startswith(str(ROOT)):
        return partly(f"imports, but from {where}, not the editable checkout")
    return works("pip install -e . (deps already present, --no-deps) then imports from another folder resolve "
                 "to the checkout")


@expectation("envs", "`lmgym.envs.make(id)` builds registered ids (plain and `rlgym/`), lists them, suggests on a typo")
def envs_make_ids(walk: Walk) -> Verdict:
    from lmgym.envs import make, registered_ids

    ids = registered_ids()
    env = make("Arithmetic-v0", level=1)
    obs, _ = env.reset(seed=0)
    make("rlgym/Arithmetic-v0")
    missing = [i for i in ("Arithmetic-v0", "GSM8K-v0", "MATH-v0", "HotpotQA-v0", "Dataset-v0") if i not in ids]
    if missing or not isinstance(obs, str):
        return fails(f"missing ids {missing} or non-text observation {type(obs).__name__}")
    try:
        make("Arithmetc-v0")
    except Exception as error:  # noqa: BLE001
        message = str(error)
        if "Arithmetic-v0" in message and "\n" not in message:
            return works(f"{len(ids)} ids; a typo is one line: {one_line(message, 120)}")
        return partly(f"typo refused without naming the close id: {one_line(message, 120)}")
    return fails("make('Arithmetc-v0') built something")


@expectation("gymnasium", "`gymnasium.make('rlgym/...')` works (fresh process) and `check_env` passes")
def gymnasium_make(walk: Walk) -> Verdict:
    code = """
import gymnasium
try:
    gymnasium.make("rlgym/Arithmetic-v0")
    print("bare: ok")
except Exception as e:
    print("bare:", type(e).__name__)
env = gymnasium.make("envs:rlgym/Arithmetic-v0", level=1)
obs, info = env.reset(seed=0)
print("prefixed:", type(obs).__name__)
from lmgym import envs
from gymnasium.utils.env_checker import check_env
env = gymnasium.make("rlgym/ArithmeticStepwise-v0")
check_env(env.unwrapped, skip_render_check=True)
print("after import + check_env: ok")
"""
    proc = walk.run([sys.executable, "-c", code])
    if proc.returncode != 0:
        return fails(f"exit {proc.returncode}: {last_lines(proc.stderr)}")
    lines = dict(line.split(": ", 1) for line in proc.stdout.strip().splitlines() if ": " in line)
    if lines.get("prefixed") != "str" or "after import + check_env" not in lines:
        return fails(one_line(proc.stdout))
    bare = lines.get("bare")
    return works(f"'envs:rlgym/...' in a fresh process and 'rlgym/...' after `import envs` both make envs, check_env "
                 f"passes; bare 'rlgym/...' before any import: {bare} (gymnasium 1.x loads no plugins)")


@expectation("gymnasium", "`gymnasium.register_envs(envs)` works, as with ale_py")
def gymnasium_register_envs(walk: Walk) -> Verdict:
    import gymnasium

    from lmgym import envs
    gymnasium.register_envs(envs)
    env = gymnasium.make("rlgym/Arithmetic-v0", level=0)
    obs, _ = env.reset(seed=1)
    if not isinstance(obs, str):
        return fails(f"observation is {type(obs).__name__}")
    return works("register_envs(envs) then gymnasium.make('rlgym/Arithmetic-v0') resets to a text prompt")


@expectation("gymnasium", "a gymnasium vector env (SyncVectorEnv of language envs) trains with the trainers, or is "
                          "refused in one line naming the alternative (what issue 27 allows)")
def gymnasium_vector_env(walk: Walk) -> Verdict:
    import gymnasium

    from lmgym.algorithms import GRPO
    from lmgym.envs import make

    vector = gymnasium.vector.SyncVectorEnv([lambda: make("Arithmetic-v0", level=0)] * 2)
    try:
        GRPO(walk.tiny_policy(), vector, walk.grpo_config(walk.tmp / "runs" / "vector")).train()
    except ValueError as error:
        message = str(error)
        if "\n" not in message and "pass the env itself" in message:
            return works("refused in one clear line naming the alternative (pass the env itself; the trainer "
                         "batches by branching one env), as issue 27 allows")
        return fails(f"ValueError: {one_line(message)}")
    except Exception as error:  # noqa: BLE001
        return fails(f"{type(error).__name__}: {one_line(error)}")
    return works("GRPO trained on a SyncVectorEnv")


@expectation("gymnasium", "gymnasium wrappers (TimeLimit, TransformReward) work with the trainers")
def gymnasium_wrappers(walk: Walk) -> Verdict:
    import gymnasium

    from lmgym.algorithms import GRPO
    from lmgym.envs import make

    inner = make("Dataset-v0", dataset=[{"prompt": "Say hi."}, {"prompt": "Say bye."}],
                 reward_fns=[lambda completions, **kw: [1.0] * len(completions)])
    env = gymnasium.wrappers.TransformReward(gymnasium.wrappers.TimeLimit(inner, max_episode_steps=4),
                                             lambda r: 2.0 * r)
    rows = GRPO(walk.tiny_policy(), env, walk.grpo_config(walk.tmp / "runs" / "wrapped")).train()
    mean = rows[-1]["reward_mean"]
    if mean != 2.0:
        return fails(f"trained, but the wrapper's reward was not used (reward_mean {mean}, expected 2.0)")
    return works("GRPO trained through TimeLimit + TransformReward and used the wrapped reward (2.0)")


# ---------------------------------------------------------------------------------------------------------------
# Envs, rewards, prompts


@expectation("envs", "the README's new-environment block (LanguageEnv subclass + register) runs as shown")
def readme_new_env_block(walk: Walk) -> Verdict:
    code = runnable_block("docs/environments.md", 'register("Capitals-v0"')
    namespace: dict[str, Any] = {}
    with working_dir(walk.tmp / "blocks" / "env"), contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(code, "docs/environments.md", "exec"), namespace)  # noqa: S102  (our own docs' code)
    if namespace.get("reward") != 1.0 or not namespace.get("terminated"):
        return fails(f"ran, but reward {namespace.get('reward')} terminated {namespace.get('terminated')}")
    lines = len([line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")])
    return works(f"the block ({lines} lines) runs verbatim; prints {one_line(out.getvalue(), 80)}")


@expectation("envs",
             "a custom per-sample reward function `fn(completion, gold, info)` plugs into make(..., reward_fns)")
def custom_reward_fn(walk: Walk) -> Verdict:
    from lmgym.envs import make

    def brevity(completion, gold, info):
        return 1.0 if len(completion) < 20 else 0.25

    env = make("Arithmetic-v0", level=1, reward_fns={"brevity": brevity})
    obs, info = env.reset(seed=0)
    _, reward, terminated, _, info = env.step(f"#### {info['gold']}")
    components = info.get("reward_components", {})
    if reward != 1.0 or components.get("brevity") != 1.0 or not terminated:
        return fails(f"reward {reward}, components {components}")
    return works("reward_fns={'brevity': fn} scores the step; the component is reported in info['reward_components']")


@expectation("envs", "chat-format prompts (lists of messages) work at reset and in sampling, with the chat template")
def chat_prompts(walk: Walk) -> Verdict:
    from lmgym.envs import make

    messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2+2?"}]
    env = make("Dataset-v0", dataset=[{"prompt": messages, "answer": "4"}],
               reward_fns=[lambda completions, answer, **kw: [float(c[0]["content"].strip() == a)
                                                               for c, a in zip(completions, answer)]])
    obs, _ = env.reset(seed=0)
    if obs != messages:
        return fails(f"reset returned {type(obs).__name__}, not the messages")
    policy = walk.tiny_policy()
    ids = policy.format_prompt(obs)
    expected = policy.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    expected = expected["input_ids"] if hasattr(expected, "keys") else list(expected)
    if list(ids) != list(expected):
        return partly("reset gives messages, but format_prompt differs from tokenizer.apply_chat_template(messages)")
    generations = policy.sample([ids], n=2, max_new_tokens=4)[0]
    texts = policy.generate_text([obs], max_new_tokens=4)
    _, reward, *_ = env.step("4")
    if len(generations) != 2 or len(texts) != 1 or reward != 1.0:
        return fails(f"{len(generations)} samples, {len(texts)} texts, reward {reward}")
    return works("reset returns the messages; format_prompt equals apply_chat_template(messages, "
                 "add_generation_prompt=True); sample and generate_text take them; step scores 1.0")


@expectation("envs", "a `datasets.Dataset` with a 'prompt' column is an env in one call and GRPO trains on it")
def dataset_env(walk: Walk) -> Verdict:
    run = walk.trl_run
    if len(run["rows"]) != 2 or not run["changed"]:
        return fails(f"{len(run['rows'])} rows logged, weights changed: {run['changed']}")
    return works("make('Dataset-v0', dataset=Dataset.from_list(rows), reward_fns=[fn]): GRPO ran 2 iterations and "
                 "moved the weights")


@expectation("trl",
             "TRL-style rewards `fn(prompts, completions, **kw)` are called once per batch, extra columns as lists")
def trl_reward_batched(walk: Walk) -> Verdict:
    calls = walk.trl_run["calls"]
    training = [c for c in calls if len(c["completions"]) == 6]  # 2 prompts x 3 samples
    if len(training) != 2:
        return fails(f"calls per training iteration: {[len(c['completions']) for c in calls]}")
    if not all(len(c["topic"]) == 6 == len(c["prompts"]) for c in training):
        return fails("extra column or prompts not one per completion")
    return works("one call per iteration with 6 completions (2 prompts x 3), prompts and the 'topic' column as "
                 "lists; env.step alone and wrapped envs call it per episode (documented)")


@expectation("trl", "a TRL reward that takes `completion_ids` gets each completion's sampled token ids")
def trl_reward_completion_ids(walk: Walk) -> Verdict:
    run = walk.trl_run
    training = [c for c in run["calls"] if len(c["completions"]) == 6]
    if not training:
        return fails("no batched call to inspect")
    tokenizer = run["policy"].tokenizer
    ids = [i for c in training for i in c["completion_ids"]]
    texts = [c for call in training for c in call["completions"]]
    if not all(isinstance(x, list) and x and all(isinstance(t, int) for t in x) for x in ids):
        return fails("completion_ids are not non-empty lists of ints")

    def text_of(completion):
        return completion[0]["content"] if isinstance(completion, list) else completion

    same = sum(tokenizer.decode(x, skip_special_tokens=True).strip() == str(text_of(t)).strip()
               for x, t in zip(ids, texts))
    if same < len(ids):
        return partly(f"ids given, but only {same}/{len(ids)} decode to their completion's text")
    return works(f"{len(ids)} completion_ids, each decoding to its completion's text")


@expectation("trl", "TRL's GRPOConfig names (per_device_train_batch_size, gradient_accumulation_steps, num_iterations, "
             "max_completion_length, num_generations, beta) work in YAML and as flags with TRL's meaning")
def trl_config_names(walk: Walk) -> Verdict:
    from lmgym.algorithms import GRPOConfig
    from lmgym.training.cli import config_from_arguments

    quickstart = load_example("quickstart")
    yaml = walk.tmp / "trl.yaml"
    yaml.write_text("per_device_train_batch_size: 4\ngradient_accumulation_steps: 2\nnum_iterations: 2\n"
                    "max_completion_length: 48\n")
    args = quickstart.build_parser().parse_args(["--config", str(yaml), "--num_generations", "4", "--beta", "0.02",
                                                 "--output_dir", str(walk.tmp / "runs" / "trl-names")])
    config = config_from_arguments(GRPOConfig, args, quickstart.PRESETS["cpu"])
    got = (config.micro_batch_size, config.minibatch_size, config.update_epochs, config.max_new_tokens,
           config.samples_per_prompt, config.kl_coeff)
    want = (4, 8, 2, 48, 4, 0.02)
    if got != want:
        return fails(f"(micro, minibatch, epochs, max_new_tokens, samples, kl) = {got}, expected {want}")
    in_python = GRPOConfig.from_trl(per_device_train_batch_size=4, gradient_accumulation_steps=2, num_iterations=2,
                                    max_completion_length=48, num_generations=4, beta=0.02,
                                    output_dir=str(walk.tmp / "runs" / "trl-names"))
    if (in_python.micro_batch_size, in_python.minibatch_size) != (4, 8):
        return fails("GRPOConfig.from_trl maps the batch names differently from the flags")
    try:
        GRPOConfig(num_generations=4, output_dir=str(walk.tmp / "runs" / "trl-names"))
        direct = "the constructor takes them too"
    except Exception as error:  # noqa: BLE001
        direct = (f"GRPOConfig(num_generations=4) itself is refused in one line ({type(error).__name__}) "
                  "naming from_trl" if "from_trl" in str(error)
                  else f"GRPOConfig(num_generations=4): {one_line(error, 80)}")
    return works(f"YAML + flags map all six (minibatch = G x micro x ranks = 8), as does GRPOConfig.from_trl; {direct}")


# ---------------------------------------------------------------------------------------------------------------
# Models and policies


@expectation("models",
             "HFPolicy wraps any causal LM (a folder path, or a model + tokenizer) and samples from text prompts")
def hfpolicy_any_causal_lm(walk: Walk) -> Verdict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lmgym.policies import HFPolicy

    by_path = HFPolicy(str(walk.tiny_dir), device="cpu")
    by_object = HFPolicy(AutoModelForCausalLM.from_pretrained(walk.tiny_dir),
                         AutoTokenizer.from_pretrained(walk.tiny_dir), device="cpu")
    for policy in (by_path, by_object):
        g = policy.sample([policy.format_prompt("What is 2 + 3?")], n=2, max_new_tokens=4)[0]
        if len(g) != 2 or len(g[0].logprobs) != len(g[0].completion_ids) or not isinstance(g[0].text, str):
            return fails("sample did not give n generations with ids, logprobs and text")
        if not isinstance(policy.generate_text(["What is 2 + 3?"], max_new_tokens=4)[0], str):
            return fails("generate_text gave no text")
    try:
        by_path.sample(["What is 2 + 3?"], n=2, max_new_tokens=4)
    except Exception as error:  # noqa: BLE001
        return partly(f"both load; generate_text(['text']) works, but sample(['text'], n=2) (the documented "
                      f"`sample(prompts, n, ...)`) raises {type(error).__name__}: {one_line(error, 60)}; it takes "
                      "token ids (format_prompt first), which the docs do not say")
    return works("HFPolicy(path) and HFPolicy(model, tokenizer) sample text prompts (n=2: ids, logprobs, text)")


@expectation("models", "LoRA the peft way: a `peft.LoraConfig` (or a peft-wrapped model) trains adapters only")
def lora_peft_config(walk: Walk) -> Verdict:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lmgym.algorithms import GRPO
    from lmgym.policies import HFPolicy

    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    try:
        HFPolicy(str(walk.tiny_dir), device="cpu", lora=config)
        direct = "lora=LoraConfig(...) accepted"
    except Exception as error:  # noqa: BLE001
        direct = f"lora=LoraConfig(...) refused: {type(error).__name__}: {one_line(error, 90)}"
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(walk.tiny_dir), config)
    policy = HFPolicy(model, AutoTokenizer.from_pretrained(walk.tiny_dir), device="cpu")
    frozen = {n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_" not in n}
    adapters = {n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_B" in n}
    GRPO(policy, vowel_env(), walk.grpo_config(walk.tmp / "runs" / "peft", learning_rate=5e-2)).train()
    params = dict(policy.model.named_parameters())
    base_moved = [n for n, p in frozen.items() if not bool((params[n] == p).all())]
    adapter_moved = any(not bool((params[n] == p).all()) for n, p in adapters.items())
    if base_moved or not adapter_moved:
        return fails(f"peft-wrapped model: base moved {base_moved[:2]}, adapters moved {adapter_moved}")
    if direct.endswith("accepted"):
        return works("lora=LoraConfig(...) accepted, and a get_peft_model(...) model trains its adapters only")
    return partly(f"a get_peft_model(...) model trains its adapters only, but {direct} (LoraSettings is the "
                  "toolkit's own)")


@expectation("models", "the docs' new-algorithm block (RLAlgorithm subclass with advantages + loss) runs as shown")
def readme_new_algorithm_block(walk: Walk) -> Verdict:
    from lmgym import policies
    code = runnable_block("docs/algorithms.md", "class Reinforce(RLAlgorithm)")
    tiny = walk.tiny_policy()
    real = policies.HFPolicy

    def hf_policy(*args, **kwargs):  # HFPolicy() -> the tiny model: the embedded one trains ~1 min here
        return tiny if not args and not kwargs else real(*args, **kwargs)

    namespace: dict[str, Any] = {}
    policies.HFPolicy = hf_policy
    try:
        with working_dir(walk.tmp / "blocks" / "algo"), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            exec(compile(code, "docs/algorithms.md", "exec"), namespace)  # noqa: S102  (our own docs' code)
    finally:
        policies.HFPolicy = real
    rows = namespace.get("rows") or []
    if len(rows) < 3 or "loss_policy" not in rows[-1]:
        return fails(f"ran, but {len(rows)} rows, keys {sorted(rows[-1]) if rows else []}")
    lines = len([line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")])
    return works(f"the block ({lines} lines) runs verbatim (HFPolicy() given the tiny model here for time) and logs "
                 "loss_policy each iteration")


@expectation("models", "a fixed seed repeats a run exactly (same metrics, same weights) on the CPU")
def seeded_runs_repeat(walk: Walk) -> Verdict:
    from lmgym.algorithms import GRPO

    results = []
    for name in ("seed-a", "seed-b"):
        policy = walk.tiny_policy()
        rows = GRPO(policy, vowel_env(), walk.grpo_config(walk.tmp / "runs" / name, train_iterations=2,
                                                          seed=7)).train()
        results.append(([untimed(r) for r in rows], [p.detach().clone() for p in policy.model.parameters()]))
    (rows_a, weights_a), (rows_b, weights_b) = results
    if rows_a != rows_b:
        return fails("same seed, different metrics")
    if not all(bool((a == b).all()) for a, b in zip(weights_a, weights_b)):
        return fails("same seed and metrics, different weights")
    return works("two runs with seed=7 give identical metrics rows and bit-identical weights")


# ---------------------------------------------------------------------------------------------------------------
# Command line and runs


@expectation("cli", "a YAML file with --config, flags overriding it, the resolved config saved in the run folder")
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


@expectation("runs", "the run folder has metrics.jsonl (a row per iteration) and PNG plots")
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


@expectation("runs", "Ctrl-C during training prints one line and exits 130, leaving a resumable checkpoint")
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


@expectation("runs", "`--resume` after Ctrl-C continues and ends bit-identical to an uninterrupted run")
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


@expectation("runs", "`--wandb offline` then `--resume --wandb offline` continues the same W&B run")
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


@expectation("runs", "checkpoint weights are safetensors that `safetensors` / transformers load")
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


@expectation("runs", "optimizer, scheduler and RNG state load with `torch.load(..., weights_only=True)`")
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


@expectation("runs", "no deprecation warnings from our calls (gradient checkpointing, DDP buffers) in a torchrun run")
def no_deprecated_calls(walk: Walk) -> Verdict:
    proc = walk.torchrun["proc"]
    if proc.returncode != 0:
        return fails(f"the torchrun run failed (exit {proc.returncode}): {last_lines(proc.stderr)}")
    warned = [line for line in proc.stderr.splitlines() if "Warning:" in line]
    named = [w for w in warned if re.search(r"gradient_checkpointing_enable|broadcast_buffers", w)]
    ours = [w for w in warned if str(ROOT) in w]
    if named:
        return fails(one_line(named[0]))
    if ours:
        return partly(f"{len(ours)} other warnings from our code: {one_line(ours[0], 140)}")
    others = len(warned)
    return works("no FutureWarning/DeprecationWarning from our code with DDP + --gradient_checkpointing under "
                 f"torchrun (warnings shown; {others} from libraries)")


@expectation("runs",
             "`torchrun --nproc_per_node 2` on the CPU trains one run: one folder, one set of prints, one model")
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


@expectation("export", "the run's model/ loads with plain `AutoModelForCausalLM` and `pipeline('text-generation')`")
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


@expectation("export", "model/ and model/adapter/ carry model cards (README.md) with YAML metadata, base as a hub id")
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


@expectation("export", "`policy.push_to_hub(repo)` and the `--push_to_hub` setting upload the model folder")
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
             "`AutoPeftModelForCausalLM.from_pretrained(adapter)` loads a LoRA run's adapter (base as a hub id)")
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


@expectation("export", "`examples/merge_lora.py ADAPTER OUT` gives a plain folder transformers loads, same outputs")
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


@expectation("export", "evaluate a saved model folder on held-out problems in a few lines")
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
             "the `openai` client works against the server: models, completions, chat with n, stop, streaming")
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


@expectation("serving", "16 concurrent requests are batched into fewer engine calls than 16")
def server_batches_concurrent(walk: Walk) -> Verdict:
    server = walk.server
    client, batcher = server["client"], server["app"].state.batcher
    model = client.models.list().data[0].id

    def ask(k: int) -> str:
        reply = client.chat.completions.create(model=model, max_tokens=4, temperature=0,
                                               messages=[{"role": "user", "content": f"What is {k} + {k}?"}])
        return reply.choices[0].message.content

    before = batcher.calls
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(ask, range(16)))
    calls = batcher.calls - before
    if len(answers) != 16:
        return fails(f"{len(answers)} answers")
    if calls >= 16:
        return fails(f"16 requests took {calls} engine calls")
    return works(f"16 concurrent chat requests answered in {calls} engine calls")


# ---------------------------------------------------------------------------------------------------------------


def run_walk(names: list[str] | None, timeout: int) -> list[dict]:
    chosen = [e for e in EXPECTATIONS if names is None or e.name in names]
    unknown = set(names or []) - {e.name for e in EXPECTATIONS}
    if unknown:
        raise SystemExit(f"unknown expectation(s): {sorted(unknown)}; --list shows them")
    results = []
    with tempfile.TemporaryDirectory(prefix="user_habits_walk_") as folder:
        walk = Walk(Path(folder), timeout)
        try:
            for number, item in enumerate(chosen, 1):
                start = time.perf_counter()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        verdict = item.check(walk)
                except Exception as error:  # noqa: BLE001  (a check that raises is a failure, named)
                    verdict = fails(f"{type(error).__name__}: {one_line(error, 160)}")
                seconds = time.perf_counter() - start
                results.append({"name": item.name, "area": item.area, "expects": item.expects,
                                "status": verdict.status, "reason": one_line(verdict.reason, 300),
                                "seconds": round(seconds, 1)})
                print(f"[{number:2d}/{len(chosen)}] {verdict.status:6s} {item.name} ({seconds:.0f} s)", flush=True)
        finally:
            walk.close()
    return results


def table(results: list[dict]) -> str:
    lines = ["| # | area | expectation | result | why |", "| --- | --- | --- | --- | --- |"]
    for number, r in enumerate(results, 1):
        lines.append(f"| {number} | {r['area']} | {r['expects']} | {r['status']} | {r['reason']} |")
    return "\n".join(lines)


def counts(results: list[dict]) -> dict[str, int]:
    return {status: sum(r["status"] == status for r in results) for status in (WORKS, PARTLY, FAILS)}


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=None, help="run this expectation only (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the expectations' names and exit")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="results JSON (default: %(default)s)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds any one subprocess may take")
    args = parser.parse_args(argv)
    # before torch and the Hugging Face libraries load: idle OpenMP threads sleep (a shared 2-core machine), offline
    for name, value in (("OMP_WAIT_POLICY", "PASSIVE"), ("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_VERBOSITY", "error"),
                        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"), ("WANDB_MODE", "disabled")):
        os.environ.setdefault(name, value)
    if args.list:
        for item in EXPECTATIONS:
            print(f"{item.name:32s} {item.expects}")
        return
    start = time.perf_counter()
    results = run_walk(args.only, args.timeout)
    minutes = (time.perf_counter() - start) / 60
    total = counts(results)
    print()
    print(table(results))
    print(f"\n{len(results)} expectations: {total[WORKS]} work, {total[PARTLY]} partly, {total[FAILS]} fail "
          f"({minutes:.1f} min)")
    if args.only is None:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        import torch
        import transformers

        out.write_text(json.dumps({
            "counts": total, "expectations": len(results), "minutes": round(minutes, 1), "commit": git_commit(),
            "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "cpu_count": os.cpu_count(), "command": "python benchmarks/user_habits_walk.py", "results": results,
        }, indent=2) + "\n")
        print(f"written: {out}")


if __name__ == "__main__":
    main()
