"""The toolkit as a user gets it: a wheel built from this tree, installed into a fresh venv (with its `lmgym`
command), used from a folder with its own `envs/` package (0.2.0's top-level `envs` would have shadowed it, or
been shadowed). Nothing is downloaded: the new venv sees the toolkit's dependencies through a .pth line naming
this interpreter's site-packages; a path line does not run the .pth files in that folder, so this tree's
editable install stays off and `lmgym` comes from the wheel."""
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import lmgym
from tests.tiers import slow

pytestmark = slow  # the slow tier (tests/tiers.py): builds the wheel and installs it in a fresh virtual environment

ROOT = Path(__file__).resolve().parents[1]

USER_SCRIPT = '''
import importlib.resources
import json
import sys

import envs  # the user's own package, found first (this script's folder leads sys.path)

assert envs.USER_ENVS, "the user's envs package"
import gymnasium

assert "lmgym" not in sys.modules
env = gymnasium.make("lmgym:lmgym/Arithmetic-v0")  # loads lmgym's registry by its module name
observation, _ = env.reset(seed=0)

import lmgym
from lmgym import GRPO, GRPOConfig, make
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

tokenizer = build_tiny_tokenizer()
policy = HFPolicy(build_tiny_model(tokenizer, seed=0), tokenizer, device="cpu")
config = GRPOConfig(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=6,
                    micro_batch_size=4, learning_rate=1e-2, eval_at_start=False, eval_episodes=2, progress=False,
                    output_dir=sys.argv[1])
rows = GRPO(policy, make("Arithmetic-v0"), config).train()
prompt = (importlib.resources.files("lmgym") / "prompts" / "single_turn_sys.txt").read_text(encoding="utf-8")
print("USER RUN " + json.dumps({"version": lmgym.__version__, "lmgym": lmgym.__file__, "envs": envs.__file__,
                                "iterations": [row["iteration"] for row in rows], "observation": observation,
                                "prompt": prompt}))
'''


def run(command: list, **kwargs) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of this tree (setuptools writes build/ and *.egg-info/ next to setup.py)."""
    source = tmp_path / "source"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("lmgym", "legacy"):
        shutil.copytree(ROOT / name, source / name, ignore=skip)
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(ROOT / name, source / name)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", tmp_path / "dist", source])
    (wheel,) = (tmp_path / "dist").glob("lmgym-*.whl")
    return wheel


def fresh_venv(tmp_path: Path) -> Path:
    """A venv whose site-packages has a .pth line naming this interpreter's, for torch and the rest."""
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "shared_dependencies.pth").write_text("".join(f"{path}\n" for path in ours), encoding="utf-8")
    return python


def test_a_wheel_in_a_fresh_venv_trains_beside_a_users_own_envs_package(tmp_path):
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert "lmgym/prompts/single_turn_sys.txt" in names, "the prompts are package data"
    assert {"lmgym/__main__.py", "lmgym/commands/main.py"} <= set(names), "the lmgym command"
    version = wheel.name.split("-")[1]
    assert version == lmgym.__version__, "setup.py reads lmgym/__init__.py's __version__"

    python = fresh_venv(tmp_path)
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel])
    user = tmp_path / "user"
    (user / "envs").mkdir(parents=True)
    (user / "envs" / "__init__.py").write_text("USER_ENVS = True\n", encoding="utf-8")
    (user / "train.py").write_text(USER_SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="disabled")
    printed = run([python, "train.py", tmp_path / "run"], cwd=user, env=env)

    line = next(line for line in printed.splitlines() if line.startswith("USER RUN "))
    result = json.loads(line[len("USER RUN "):])
    venv = python.parent.parent.resolve()
    assert Path(result["lmgym"]).resolve().is_relative_to(venv), result["lmgym"]
    assert Path(result["envs"]).resolve() == (user / "envs" / "__init__.py").resolve()
    assert result["version"] == lmgym.__version__
    assert result["iterations"] == [1, 2]
    assert isinstance(result["observation"], str) and result["observation"]
    assert result["prompt"] == (ROOT / "lmgym" / "prompts" / "single_turn_sys.txt").read_text(encoding="utf-8")
    # the console script setup.py declares, installed beside the venv's python
    assert run([python.parent / "lmgym", "--version"], cwd=user, env=env).strip() == f"lmgym {lmgym.__version__}"
