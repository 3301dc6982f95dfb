"""The public API imports: every name `lmgym` and its subpackages export, every `from lmgym... import ...` the
README and the docs show, and every `[name][lmgym.path]` cross-reference of the docs."""
import importlib
import re
from pathlib import Path

import pytest

import lmgym

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SUBPACKAGES = ("core", "retrieval", "envs", "buffers", "policies", "episodes", "training", "search", "evaluation",
               "traindata", "algorithms", "serving")
IMPORT = re.compile(r"^\s*from (lmgym(?:\.\w+)*) import \(?([\w, \n]+?)\)?\s*(?:#.*)?$", re.M)
XREF = re.compile(r"\]\[(lmgym(?:\.\w+)+)\]")


def documented_imports() -> list[tuple[str, str]]:
    """(module, name) for every import statement of lmgym written on a page."""
    found = set()
    for page in PAGES:
        for module, names in IMPORT.findall(page.read_text(encoding="utf-8")):
            found |= {(module, name.strip()) for name in names.split(",") if name.strip()}
    return sorted(found)


def resolve(dotted: str):
    """The object at a dotted path: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[n:]:
            value = getattr(value, attribute)
        return value
    raise ModuleNotFoundError(dotted)


def test_every_top_level_name_resolves():
    expected = {"GRPO", "GRPOConfig", "make", "HFPolicy", "evaluate", "TrainerCallback", "__version__"}
    assert expected <= set(lmgym.__all__)
    missing = [name for name in lmgym.__all__ if not hasattr(lmgym, name)]
    assert not missing, missing
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        _ = lmgym.NoSuchName


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_every_name_a_subpackage_exports_resolves(package):
    module = importlib.import_module(f"lmgym.{package}")
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert module.__all__ and not missing, missing


def test_every_import_the_pages_show_works():
    imports = documented_imports()
    assert len(imports) > 20 and ("lmgym", "GRPO") in imports
    failing = []
    for module, name in imports:
        try:
            getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as err:
            failing.append(f"from {module} import {name}: {err}")
    assert not failing, failing


def test_every_cross_reference_of_the_docs_resolves():
    targets = sorted({t for page in PAGES for t in XREF.findall(page.read_text(encoding="utf-8"))})
    assert len(targets) > 5
    failing = []
    for target in targets:
        try:
            resolve(target)
        except (ImportError, AttributeError) as err:
            failing.append(f"{target}: {err}")
    assert not failing, failing
