"""Nothing in the toolkit touches GPU memory outside torch: with a `jax` package first on sys.path (a fake one that
records its import and any `jax.lax.top_k` call, with a dist-info so metadata lookups see it installed), retrieval,
the embedders and GRPO on the RAG env with a BM25 store never import it. bm25s imports `jax.lax` and runs top_k at
import time when it can (bm25s/selection.py), which initialises JAX's GPU backend: 75% of the GPU. Each script
runs in a fresh interpreter, so sys.modules starts clean."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from lmgym.core.extras import hidden_modules
from tests.tiers import slow

ROOT = Path(__file__).resolve().parents[1]
FAKE_JAX = '''
import os, traceback
with open(os.environ["FAKE_JAX_LOG"], "a") as log:
    log.write("import jax from:\\n" + "".join(traceback.format_stack()) + "\\n")
__version__ = "0.4.30"
'''
FAKE_LAX = '''
import os
def top_k(operand, k):
    with open(os.environ["FAKE_JAX_LOG"], "a") as log:
        log.write("jax.lax.top_k ran (a warm-up)\\n")
    raise RuntimeError("the fake jax computes nothing")
'''
PRELUDE = """
import json, sys
import importlib.util
spec = importlib.util.find_spec("jax")
assert spec is not None and spec.origin.startswith({fake!r}), spec  # the fake is what `import jax` would load
"""
RETRIEVAL = """
import tempfile
from lmgym import algorithms, buffers, core, envs, episodes, policies, retrieval, search, serving, training, traindata
from lmgym.retrieval import Document, DocumentStore, HashingEmbedder, SentenceTransformerEmbedder, StoreConfig
from tests.rag_toys import CORPUS

documents = [Document(f"doc{{i}}", title, text) for i, (title, text) in enumerate(CORPUS.items())]
bm25 = DocumentStore.build(documents, StoreConfig(dense=False), progress=False)
hybrid = DocumentStore.build(documents, StoreConfig(), embedder=HashingEmbedder(64), progress=False)
with tempfile.TemporaryDirectory() as folder:
    loaded = DocumentStore.load(bm25.save(folder + "/index"))
minilm = SentenceTransformerEmbedder().embed(["Where was Gustave Eiffel born?"])
top = [bm25.search("Gustave Eiffel born", 1)[0].title, loaded.search("Big Ben", 1)[0].title,
       hybrid.search("Eiffel Tower Paris", 1)[0].title]
import bm25s
print(json.dumps({{"top": top, "minilm": list(minilm.shape), "bm25s_jax": bm25s.selection.JAX_IS_AVAILABLE,
                  "jax": sorted(name for name in sys.modules if name.split(".")[0] in ("jax", "jaxlib"))}}))
"""
TRAINING = """
from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import RAGHotpotQAEnv
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.retrieval import Document, DocumentStore, StoreConfig
from tests.rag_toys import CORPUS, RECORDS

documents = [Document(f"doc{{i}}", title, text) for i, (title, text) in enumerate(CORPUS.items())]
store = DocumentStore.build(documents, StoreConfig(dense=False), progress=False)
tok = build_tiny_tokenizer()
policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
config = GRPOConfig(train_iterations=1, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                    micro_batch_size=4, eval_at_start=False, eval_every=0, progress=False, save_every=0,
                    output_dir={run!r}, seed=0)
rows = GRPO(policy, RAGHotpotQAEnv(records=RECORDS, store=store, max_searches=1), config).train()
print(json.dumps({{"iterations": [row["iteration"] for row in rows],
                  "jax": sorted(name for name in sys.modules if name.split(".")[0] in ("jax", "jaxlib"))}}))
"""
USERS_JAX = """
import jax                      # the user's own, imported before the toolkit's first BM25 use
mine = {{name: module for name, module in sys.modules.items() if name.split(".")[0] == "jax"}}
from lmgym.retrieval import Document, DocumentStore, StoreConfig
store = DocumentStore.build([Document("a", "Etna", "Etna is a volcano in Sicily.")], StoreConfig(dense=False),
                            progress=False)
import bm25s
after = {{name: module for name, module in sys.modules.items() if name.split(".")[0] == "jax"}}
print(json.dumps({{"same": after.keys() == mine.keys() and all(after[k] is mine[k] for k in mine),
                  "jax": sorted(after), "bm25s_jax": bm25s.selection.JAX_IS_AVAILABLE,
                  "hit": store.search("volcano", 1)[0].title}}))
"""


@pytest.fixture
def fake_jax(tmp_path) -> Path:
    """A folder holding a `jax` package (and its dist-info) that logs each import and top_k call to jax.log."""
    folder = tmp_path / "site"
    (folder / "jax").mkdir(parents=True)
    (folder / "jax" / "__init__.py").write_text(FAKE_JAX)
    (folder / "jax" / "lax.py").write_text(FAKE_LAX)
    (folder / "jax-0.4.30.dist-info").mkdir()
    (folder / "jax-0.4.30.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: jax\nVersion: 0.4.30\n")
    return folder


def run_with_fake_jax(fake_jax: Path, script: str) -> tuple[dict, str]:
    """Run `script` (after PRELUDE) with the fake jax first on the path; (its last line as JSON, jax.log)."""
    log = fake_jax.parent / "jax.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake_jax), str(ROOT)]), "FAKE_JAX_LOG": str(log),
           "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    code = PRELUDE.format(fake=str(fake_jax)) + textwrap.dedent(script)
    result = subprocess.run([sys.executable, "-c", code], cwd=fake_jax.parent, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), log.read_text() if log.exists() else ""


@slow
def test_retrieval_and_every_embedder_never_import_jax(fake_jax):
    pytest.importorskip("bm25s")
    pytest.importorskip("sentence_transformers")
    outcome, log = run_with_fake_jax(fake_jax, RETRIEVAL.format())
    assert log == ""  # without the hiding: bm25s's `import jax.lax` (and its top_k warm-up) is logged here
    assert outcome == {"top": ["Gustave Eiffel", "Big Ben", "Eiffel Tower"], "minilm": [1, 384],
                       "bm25s_jax": False, "jax": []}


@slow
def test_grpo_on_the_rag_env_with_a_bm25_store_never_imports_jax(fake_jax, tmp_path):
    pytest.importorskip("bm25s")
    outcome, log = run_with_fake_jax(fake_jax, TRAINING.format(run=str(tmp_path / "run")))
    assert log == "" and outcome == {"iterations": [1], "jax": []}


@slow
def test_a_jax_the_user_imported_stays_theirs_and_bm25s_does_not_warm_it_up(fake_jax):
    pytest.importorskip("bm25s")
    outcome, log = run_with_fake_jax(fake_jax, USERS_JAX.format())
    events = [line for line in log.splitlines() if line and not line.startswith(" ")]  # stack lines are indented
    assert events == ["import jax from:"]  # their import; bm25s's `import jax.lax` and top_k warm-up never ran
    assert outcome == {"same": True, "jax": ["jax"], "bm25s_jax": False, "hit": "Etna"}


def test_hidden_modules_hides_a_package_and_restores_sys_modules_exactly(monkeypatch):
    present, submodule = types.ModuleType("pkg_x"), types.ModuleType("pkg_x.sub")
    monkeypatch.setitem(sys.modules, "pkg_x", present)
    monkeypatch.setitem(sys.modules, "pkg_x.sub", submodule)
    monkeypatch.setitem(sys.modules, "pkg_y", None)  # blocked already: stays blocked
    monkeypatch.delitem(sys.modules, "pkg_z", raising=False)
    before = dict(sys.modules)
    with hidden_modules(("pkg_x", "pkg_y", "pkg_z")):
        for name in ("pkg_x", "pkg_x.sub", "pkg_y", "pkg_z", "pkg_z.sub"):
            with pytest.raises(ModuleNotFoundError):
                __import__(name)
        sys.modules["pkg_z.new"] = types.ModuleType("pkg_z.new")  # imported inside the block: dropped after it
    assert sys.modules == before and sys.modules["pkg_x"] is present and sys.modules["pkg_x.sub"] is submodule
    assert "pkg_z" not in sys.modules and "pkg_z.new" not in sys.modules


def test_hidden_modules_restores_sys_modules_when_the_import_fails(monkeypatch):
    monkeypatch.setitem(sys.modules, "pkg_x", types.ModuleType("pkg_x"))
    before = dict(sys.modules)
    with pytest.raises(ZeroDivisionError), hidden_modules(("pkg_x",)):
        _ = 1 / 0
    assert sys.modules == before
