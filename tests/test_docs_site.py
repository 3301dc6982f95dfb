"""The docs site's settings: Google-style `Args:` sections render as parameter tables, and the docs state the
version `lmgym.__version__` holds (setup.py reads it from there too)."""
import re

import yaml

import lmgym
from tests.doc_blocks import DOCS, ROOT

VERSION_LINE = re.compile(r"These pages document lmgym (\S+) \(`lmgym.__version__`\)")


def python_handler_options() -> dict:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    plugin = next(p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p)
    return plugin["handlers"]["python"]["options"]


def test_mkdocstrings_reads_google_docstrings_into_tables():
    options = python_handler_options()
    assert options["docstring_style"] == "google"
    assert options["docstring_section_style"] == "table"


def test_the_docs_state_the_package_version_once():
    found = [(page.name, m.group(1)) for page in sorted(DOCS.rglob("*.md"))
             for m in VERSION_LINE.finditer(page.read_text(encoding="utf-8"))]
    assert found == [("install.md", lmgym.__version__)]
