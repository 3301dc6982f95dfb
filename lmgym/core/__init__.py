"""The lowest layer, which every package builds on and which imports none of them: the files the toolkit
writes and reads (atomic, symlink-refusing writes in `atomic_io`; JSON and JSON Lines with size and
nesting limits in `jsonl`), how errors read (one-line text in `messages`) and the checked-config base every
config dataclass derives from (`checked_config`; coercion in `coercion`, dotted names in `dotted_names`)."""
from lmgym.core.atomic_io import SymlinkRefusedError, atomic_write_text, remove_tree
from lmgym.core.checked_config import CheckedConfig, ConfigError, field_help, setting
from lmgym.core.jsonl import DataFileNotFoundError, MalformedRowError, parse_jsonl, read_json, read_jsonl
from lmgym.core.messages import error_line, first_line, one_line

__all__ = [
    "atomic_write_text", "remove_tree", "SymlinkRefusedError", "parse_jsonl", "read_json", "read_jsonl",
    "DataFileNotFoundError", "MalformedRowError", "one_line", "first_line", "error_line",
    "CheckedConfig", "ConfigError", "setting", "field_help",
]
