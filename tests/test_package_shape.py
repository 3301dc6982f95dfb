"""The library's shape (issue 39): no folder is a flat heap of modules, and no module is a scrap.

- no library folder holds more than 20 modules outside its subpackages (the *.py files other than
  `__init__.py` directly in it);
- no library module is under 40 lines, except `__init__.py` files and `python -m`'s `__main__.py` hook (a smaller
  one is folded into its user).
"""
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "lmgym"
MAX_MODULES_PER_FOLDER = 20
MIN_MODULE_LINES = 40


def folders() -> list[Path]:
    """The library's package folders (lmgym/ and every folder below it holding Python files)."""
    return sorted({path.parent for path in LIBRARY.rglob("*.py") if "__pycache__" not in path.parts})


def modules(folder: Path) -> list[Path]:
    """The modules directly in `folder`, `__init__.py` and `__main__.py` aside."""
    return sorted(path for path in folder.glob("*.py") if path.name not in ("__init__.py", "__main__.py"))


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_checks_see_the_library():
    assert (LIBRARY / "__init__.py").is_file()
    assert LIBRARY / "training" in folders() and LIBRARY / "envs" / "grading" in folders()
    assert line_count(LIBRARY / "moved.py") >= MIN_MODULE_LINES


def test_no_folder_holds_more_than_20_modules_outside_its_subpackages():
    crowded = {str(folder.relative_to(LIBRARY.parent)): len(modules(folder)) for folder in folders()
               if len(modules(folder)) > MAX_MODULES_PER_FOLDER}
    assert not crowded, (f"folders with more than {MAX_MODULES_PER_FOLDER} modules (group a concept's files "
                         f"into a subpackage): {crowded}")


def test_no_module_is_under_40_lines():
    small = {str(path.relative_to(LIBRARY.parent)): line_count(path) for folder in folders()
             for path in modules(folder) if line_count(path) < MIN_MODULE_LINES}
    assert not small, (f"modules under {MIN_MODULE_LINES} lines (fold each into its user; __init__.py files "
                       f"aside): {small}")
