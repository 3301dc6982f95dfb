"""Optional stacks are extras: each feature used without its library says, in one line, which pip command
installs it (a missing library is simulated by None in sys.modules), and the core packages import and train
GRPO with every optional library blocked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmgym.core.extras import EXTRAS, MissingExtraError, import_extra
from lmgym.retrieval import Document, DocumentStore, HashingEmbedder, SentenceTransformerEmbedder, StoreConfig
from tests.test_examples import error_line, load_script
from tests.tiers import slow

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [Document("a", "Etna", "Etna is a volcano in Sicily."), Document("b", "Danube", "The Danube flows.")]


def message(extra: str, feature: str, module: str) -> str:
    return (f"{feature} needs the [{extra}] extra ({module} is not installed): "
            f"pip install -e '.[{extra}]' in the toolkit's folder")


def missing(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make `modules` (and their submodules an earlier test imported) unimportable, as if not installed."""
    for module in modules:
        for name in [module] + [name for name in sys.modules if name.startswith(module + ".")]:
            monkeypatch.setitem(sys.modules, name, None)


def raised(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text and isinstance(error.value, ImportError)
    return text


def test_bm25_retrieval_without_bm25s(monkeypatch):
    missing(monkeypatch, "bm25s")
    with pytest.raises(MissingExtraError) as error:
        DocumentStore.build(DOCUMENTS, StoreConfig(dense=False), progress=False)
    assert raised(error) == message("rag", "BM25 retrieval", "bm25s")


def test_a_saved_index_without_bm25s_is_the_extra_not_a_corrupt_index(monkeypatch, tmp_path):
    from lmgym.envs.hotpotqa.rag import open_store

    DocumentStore.build(DOCUMENTS, StoreConfig(dense=False), progress=False).save(tmp_path / "index")
    missing(monkeypatch, "bm25s")
    with pytest.raises(MissingExtraError) as error:
        DocumentStore.load(tmp_path / "index")
    assert raised(error) == message("rag", "BM25 retrieval", "bm25s")
    with pytest.raises(MissingExtraError) as error:  # the RAG env given the index folder as its store
        open_store(tmp_path / "index")
    assert raised(error) == message("rag", "RAG", "bm25s")


def test_dense_retrieval_without_sentence_transformers(monkeypatch, tmp_path):
    missing(monkeypatch, "sentence_transformers")
    embedder = SentenceTransformerEmbedder(str(tmp_path))  # a saved index still opens: the model loads on use
    with pytest.raises(MissingExtraError) as error:
        embedder.embed(["a query"])
    assert raised(error) == message("rag", "Dense retrieval", "sentence_transformers")


def test_the_hashing_embedder_without_scikit_learn(monkeypatch):
    missing(monkeypatch, "sklearn")
    with pytest.raises(MissingExtraError) as error:
        HashingEmbedder(16)
    assert raised(error) == message("rag", "The hashing embedder", "sklearn")


def test_the_server_without_fastapi(monkeypatch):
    missing(monkeypatch, "fastapi", "starlette", "pydantic")
    for module in ("lmgym.serving.app", "lmgym.serving.body_limit", "lmgym.serving.requests"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    from lmgym import serving
    assert serving.ServerLimits().max_budget > 0  # the package and its limits import without the extra
    with pytest.raises(MissingExtraError) as error:
        from lmgym.serving import create_app  # noqa: F401
    assert raised(error) == message("serve", "The HTTP server", "fastapi")


def test_the_serve_script_without_uvicorn_is_one_line_before_any_model_loads(monkeypatch, tmp_path):
    serve = load_script(ROOT / "examples" / "serve.py")
    missing(monkeypatch, "uvicorn")
    line = error_line(serve, ["--model", str(tmp_path / "no-model")])
    assert line == "error: " + message("serve", "The HTTP server", "uvicorn")


def test_the_math_verify_grader_without_math_verify(monkeypatch):
    from lmgym.envs.answers import answers_equal

    missing(monkeypatch, "math_verify")
    with pytest.raises(MissingExtraError) as error:
        answers_equal("1/2", "0.5", grader="math_verify")
    assert raised(error) == message("math-verify", 'grader="math_verify"', "math_verify")
    assert answers_equal("1/2", "0.5")  # the default grader needs no Math-Verify


def test_an_import_error_inside_an_installed_library_is_not_called_a_missing_extra(monkeypatch):
    missing(monkeypatch, "torch_not_an_extra")  # a module of no extra: its error passes through unchanged
    with pytest.raises(ModuleNotFoundError) as error:
        import_extra("torch_not_an_extra", "Nothing")
    assert not isinstance(error.value, MissingExtraError)


BLOCKED = sorted({module for modules in EXTRAS.values() for module in modules} | {"wandb"})
CORE_RUN = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None  # as if not installed: `import name` fails, find_spec(name) is None
import json
from lmgym import algorithms, buffers, core, envs, episodes, policies, retrieval, search, serving, training, traindata
from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.envs.answers import answers_equal
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

tok = build_tiny_tokenizer()
policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
config = GRPOConfig(train_iterations=1, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                    micro_batch_size=4, eval_at_start=False, eval_every=0, progress=False, save_every=0,
                    output_dir={run!r}, seed=0)
GRPO(policy, make("Arithmetic-v0"), config).train()
graded = [answers_equal("(x+1)^2", "x^2+2x+1"), answers_equal("1+i", "i+1"), answers_equal("x^2", "(x+1)^2")]
loaded = sorted(name for name in {blocked!r} if sys.modules.get(name) is not None)
print(json.dumps({{"graded": graded, "loaded": loaded}}))
"""


@slow
def test_a_core_install_imports_every_package_and_trains_grpo(tmp_path):
    script = CORE_RUN.format(blocked=BLOCKED, run=str(tmp_path / "run"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome == {"graded": [True, True, False], "loaded": []}  # the default grader, in its worker
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [1]
