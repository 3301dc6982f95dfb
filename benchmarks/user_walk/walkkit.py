"""What the walk's checks share: the verdicts, the registry of checks, and `Walk`, the resources several checks
use (the tiny model's folder, the quickstart runs, a LoRA run, the server), built lazily, once per process.

This file is copied into the user's folder and imported there by `walkrun.py`, under the fresh venv's python:
every `lmgym` it imports is the installed wheel's. Its top level imports the standard library only, so the
harness (the repo's interpreter) can read the list of checks without importing lmgym.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WORKS, PARTLY, FAILS = "works", "partly", "fails"
USER = Path(__file__).resolve().parent  # the user's folder (in the repo: benchmarks/user_walk, never run there)
QUICKSTART = USER / "quickstart.py"


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
    group: str  # checks of one group run in one process (they share a costly resource: a run, a server)


EXPECTATIONS: list[Expectation] = []


def expectation(area: str, expects: str, group: str | None = None):
    """Register `fn(walk) -> Verdict` as one expectation of the walk, named after the function."""
    def register(fn: Callable[[Walk], Verdict]) -> Callable[[Walk], Verdict]:
        EXPECTATIONS.append(Expectation(fn.__name__, area, expects, fn, group or fn.__name__))
        return fn
    return register


def works(reason: str) -> Verdict:
    return Verdict(WORKS, reason)


def partly(reason: str) -> Verdict:
    return Verdict(PARTLY, reason)


def fails(reason: str) -> Verdict:
    return Verdict(FAILS, reason)


def one_line(text: Any, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def last_lines(text: str, n: int = 3) -> str:
    return one_line(" | ".join(line for line in text.strip().splitlines()[-n:]))


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


def vowel_share(completions, **kwargs) -> list[float]:
    """A TRL-style reward that varies between samples of the tiny model (so updates are not zero)."""
    texts = [c[0]["content"] if isinstance(c, list) else str(c) for c in completions]
    return [sum(ch in "aeiou" for ch in t) / max(len(t), 1) for t in texts]


def vowel_env():
    from lmgym.envs import make

    return make("Dataset-v0", dataset=[{"prompt": "Name a color."}, {"prompt": "Name a fruit."}],
                reward_fns=[vowel_share])


def load_example(name: str):
    """The user's copy of examples/<name>.py as a module (the examples are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"walk_example_{name}", USER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses defined in it look their module up
    spec.loader.exec_module(module)
    return module


def lmgym_home() -> Path:
    """The folder the installed lmgym lives in (inside the venv)."""
    import lmgym

    return Path(lmgym.__file__).resolve().parent


@contextlib.contextmanager
def working_dir(path: Path):
    old = Path.cwd()
    path.mkdir(parents=True, exist_ok=True)
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


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
    """The work folder (inside the user's folder) and the resources several expectations share."""

    def __init__(self, tmp: Path, timeout: int):
        self.tmp, self.timeout = tmp, timeout
        tmp.mkdir(parents=True, exist_ok=True)
        import torch

        torch.set_num_threads(2)

    # -- subprocesses: the user's commands, run in the user's folder with the venv's python ---------------------
    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(extra)
        return env

    def run(self, args: list[str], **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in args], cwd=USER, env=self.env(**env), capture_output=True, text=True,
                              timeout=self.timeout)

    def quickstart(self, *flags: str) -> subprocess.CompletedProcess:
        return self.run([sys.executable, QUICKSTART.name, *flags])

    @staticmethod
    def lmgym_command() -> str:
        """The console script the wheel installed beside the venv's python."""
        return str(Path(sys.executable).parent / "lmgym")

    # -- models ----------------------------------------------------------------------------------------------
    @functools.cached_property
    def tiny_dir(self) -> Path:
        """The tiny model and its tokenizer saved as a Hugging Face folder (what `--model PATH` takes); saved once
        in the user's folder and reused by later processes."""
        from lmgym.policies import build_tiny_model, build_tiny_tokenizer

        folder = USER / "tiny-model"
        if not (folder / "config.json").is_file():
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
        first = subprocess.Popen([sys.executable, QUICKSTART.name, *self.cli_flags(straight)], cwd=USER,
                                 env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        second = subprocess.Popen([sys.executable, QUICKSTART.name, *self.cli_flags(broken), "--wandb", "offline"],
                                  cwd=USER, env=self.env(**wandb_env), stdout=subprocess.PIPE,
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
        resumed = self.run([sys.executable, QUICKSTART.name, *self.cli_flags(broken), "--wandb", "offline",
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
                   "--master_addr", "127.0.0.1", "--master_port", str(free_port()), QUICKSTART.name,
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
        algo.hub_api = hub  # the hub preflight and the upload go to the local stand-in (no network here)
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
        """The user's copy of examples/serve.py's app (--model the tiny folder) under uvicorn on a free port, and
        an openai client."""
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
        for proc in getattr(self, "_processes", []):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
