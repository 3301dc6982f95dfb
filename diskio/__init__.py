"""The files the toolkit writes and reads, and how their errors read: atomic, symlink-refusing writes
(`atomic_io`), JSON and JSON Lines with size and nesting limits (`jsonl`), one-line error text
(`messages`). The lowest layer: it imports no other package of the toolkit."""
from diskio.atomic_io import SymlinkRefusedError, atomic_write_text, remove_tree
from diskio.jsonl import DataFileNotFoundError, MalformedRowError, parse_jsonl, read_json, read_jsonl
from diskio.messages import error_line, first_line, one_line

__all__ = [
    "atomic_write_text", "remove_tree", "SymlinkRefusedError", "parse_jsonl", "read_json", "read_jsonl",
    "DataFileNotFoundError", "MalformedRowError", "one_line", "first_line", "error_line",
]
