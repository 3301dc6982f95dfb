"""The user's machine, as the walk builds it: a wheel built from this tree, a fresh venv with that wheel installed,
and a user folder (its own `envs/` and `training/` packages, the examples and docs blocks a user copies) where
every check runs with the venv's `python` and its `lmgym` command. Nothing here imports `lmgym`.

How the venv gets its third-party packages (`deps="shared"`, the default, offline):
`python -m venv --without-pip` makes the venv; one `.pth` file in its site-packages names the interpreter's own
site-packages folders (the walk's harness runs on /work/main/.venv's python: torch, transformers, datasets, peft,
openai, tensorboard, mlflow, trackio...); then `pip --python <venv> install --no-deps --no-index` puts the wheel
into the venv's site-packages. A path line in a .pth only appends that folder to sys.path: the .pth files *inside*
it are not run, so the shared venv's editable `lmgym` (its `__editable__` finder) stays off, and the venv's own
site-packages comes first, so `import lmgym` is the wheel's (the checks assert `lmgym.__file__` is in the venv).
For what the walk tests this is `pip install dist/*.whl`: the same wheel files in the same layout, the same console
script, and dependencies that satisfy the wheel's requirements (the shared venv was installed from setup.py's
requirements: its `pip check` names no missing or conflicting requirement of lmgym; on 2026-11-28 it listed only
an unrelated package's). What it does not test is the resolution itself
(downloading the requirements): `deps="index"` does that, a real `pip install "<wheel>[all]"` plus the trackers,
the `openai` client and tensorboard, when an index is reachable.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# what a user copies beside their code: the example scripts the checks run, and the docs blocks they paste
EXAMPLES = ("quickstart.py", "common.py", "serve.py", "merge_lora.py")
DOC_BLOCKS = {  # file written in the user folder -> (docs page, a marker inside the fenced python block)
    "capitals_env.py": ("docs/environments.md", 'register("Capitals-v0"'),
    "reinforce_algorithm.py": ("docs/algorithms.md", "class Reinforce(RLAlgorithm)"),
}
# the user's own packages, named as lmgym 0.2.0's top-level packages were (the wheel's shims must not win)
USER_PACKAGES = {"envs": "USER_ENVS = True\n\ndef make(name):\n    return f'user env {name}'\n",
                 "training": "USER_TRAINING = True\n"}
INDEX_EXTRAS = ["tensorboard", "mlflow-skinny", "trackio", "openai"]  # what deps="index" adds to the wheel's [all]


@dataclass(frozen=True)
class UserMachine:
    wheel: Path
    venv: Path
    user: Path  # the user's folder: every check runs here

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def version(self) -> str:
        return self.wheel.name.split("-")[1]

    def env(self) -> dict[str, str]:
        """The environment of a user with the venv activated, offline, on a shared 2-core machine."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                            "MASTER_PORT", "RLGYM_TRACEBACK", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
        env.update(VIRTUAL_ENV=str(self.venv), PATH=f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="2", OMP_WAIT_POLICY="PASSIVE",
                   TRANSFORMERS_VERBOSITY="error", HF_HUB_DISABLE_PROGRESS_BARS="1", WANDB_MODE="disabled",
                   WANDB_SILENT="true", WALK_WHEEL=str(self.wheel), WALK_VENV=str(self.venv),
                   HF_TOKEN_PATH=str(self.user / ".no-hf-token"),  # no cached login: the hub checks see none
                   MLFLOW_TRACKING_URI=(self.user / "mlruns").as_uri(), TRACKIO_DIR=str(self.user / "trackio"))
        return env


def run(command: list, **kwargs) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=900, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))}: exit {done.returncode}\n{done.stdout[-2000:]}\n"
                           f"{done.stderr[-2000:]}")
    return done.stdout


def build_wheel(dist: Path) -> Path:
    """`pip wheel` of a copy of this tree (setuptools writes build/ and *.egg-info/ beside setup.py, so a copy
    keeps the checkout clean), no build isolation and no index: setuptools is the interpreter's."""
    source = dist.parent / "source"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("lmgym", "legacy"):
        shutil.copytree(ROOT / name, source / name, ignore=skip)
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(ROOT / name, source / name)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "--disable-pip-version-check", "-w", dist, source])
    (wheel,) = dist.glob("lmgym-*.whl")
    return wheel


def make_venv(venv: Path, wheel: Path, deps: str) -> None:
    """The venv with the wheel installed; its third-party packages as the module docstring says."""
    if deps == "shared":
        run([sys.executable, "-m", "venv", "--without-pip", venv])
        python = venv / "bin" / "python"
        site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
        shared = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
        (site / "shared_dependencies.pth").write_text("".join(f"{path}\n" for path in shared), encoding="utf-8")
        run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q",
             "--disable-pip-version-check", wheel])
    elif deps == "index":
        run([sys.executable, "-m", "venv", venv])
        run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
             f"{wheel}[all,test]", *INDEX_EXTRAS])
    else:
        raise ValueError(f"deps: shared or index, not {deps!r}")


def docs_block(page: str, marker: str) -> str:
    """The code of the fenced python block of `page` that contains `marker` (what a user pastes)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        if marker in block:
            return block
    raise LookupError(f"{page}: no python block contains {marker!r}")


def make_user_folder(user: Path) -> None:
    """The user's project: own `envs/` and `training/` packages, the examples and docs blocks copied in, and the
    walk's own files (walkkit.py, checks_*.py, walkrun.py: user code that imports the installed lmgym)."""
    for name, body in USER_PACKAGES.items():
        (user / name).mkdir(parents=True)
        (user / name / "__init__.py").write_text(body, encoding="utf-8")
    for name in EXAMPLES:
        shutil.copy(ROOT / "examples" / name, user / name)
    for name, (page, marker) in DOC_BLOCKS.items():
        (user / name).write_text(docs_block(page, marker), encoding="utf-8")
    for path in HERE.glob("*.py"):
        if path.name != "harness.py":
            shutil.copy(path, user / path.name)


def user_machine(folder: Path, deps: str = "shared", wheel: Path | None = None) -> UserMachine:
    """Build (or take) the wheel, make the venv, make the user folder, all under `folder`."""
    wheel = wheel or build_wheel(folder / "dist")
    make_venv(folder / "venv", wheel, deps)
    make_user_folder(folder / "user")
    return UserMachine(wheel.resolve(), (folder / "venv").resolve(), (folder / "user").resolve())
