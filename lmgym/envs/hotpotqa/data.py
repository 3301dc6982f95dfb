"""HotpotQA records from either of its two layouts, a local file or folder, or the Hugging Face hub.

Layouts:
- the hub's (``hotpot_qa``/``distractor``, one JSON object a line when saved as JSONL): ``id``,
  ``supporting_facts = {"title": [...], "sent_id": [...]}``, ``context = {"title": [...], "sentences": [[...]]}``;
- the official release's (one JSON array): ``_id``, ``supporting_facts = [[title, sent_id], ...]``,
  ``context = [[title, [sentence, ...]], ...]``.

Both become the same frozen `HotpotQARecord`. A malformed record is a one-line `MalformedRowError`
naming the file and the record.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmgym.core.jsonl import read_json
from lmgym.envs.data import DataFileNotFoundError, MalformedRowError, load_rows, read_jsonl
from lmgym.envs.math import check_subset

HUB_ID, HUB_CONFIG = "hotpot_qa", "distractor"
MAX_JSON_ARRAY_BYTES = 512 * 2**20  # an official-layout file is read whole; the full dev set is ~46 MB


@dataclass(frozen=True)
class HotpotQARecord:
    """One HotpotQA question with its supporting facts and its (distractor-setting) context paragraphs."""

    id: str
    question: str
    answer: str
    type: str
    level: str
    supporting_facts: tuple[tuple[str, int], ...]  # (paragraph title, sentence index)
    context: tuple[tuple[str, tuple[str, ...]], ...]  # (paragraph title, its sentences)

    @property
    def supporting_titles(self) -> tuple[str, ...]:
        """The titles of the supporting paragraphs, each once, in the order first cited."""
        return tuple(dict.fromkeys(title for title, _ in self.supporting_facts))


def record_from_row(row: Mapping[str, Any], where: str = "row") -> HotpotQARecord:
    """A record from a row of either layout; MalformedRowError (one line, naming `where`) otherwise."""
    def fail(what: str) -> MalformedRowError:
        return MalformedRowError(f"{where}: not a HotpotQA record ({what})")

    if not isinstance(row, Mapping):
        raise fail(f"expected a JSON object, got {type(row).__name__}")
    record_id = row.get("id", row.get("_id"))
    for name, value in (("id", record_id), ("question", row.get("question")), ("answer", row.get("answer"))):
        if not isinstance(value, str):
            raise fail(f"{name} must be a string")
    facts, context = row.get("supporting_facts"), row.get("context")
    try:
        if isinstance(facts, Mapping):  # the hub's columns
            facts = list(zip(facts["title"], facts["sent_id"], strict=True))
        if isinstance(context, Mapping):
            context = list(zip(context["title"], context["sentences"], strict=True))
        supporting = tuple((str(title), int(sent)) for title, sent in facts)
        paragraphs = tuple((str(title), tuple(str(s) for s in sentences)) for title, sentences in context)
    except (KeyError, TypeError, ValueError) as err:
        raise fail(f"supporting_facts/context: {' '.join(str(err).split())[:120] or type(err).__name__}") from None
    return HotpotQARecord(record_id, row["question"], row["answer"], str(row.get("type", "")),
                          str(row.get("level", "")), supporting, paragraphs)


def read_hotpotqa_file(path: str | Path) -> list[HotpotQARecord]:
    """Every record of one file: JSONL (one object a line) or the official JSON array."""
    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"HotpotQA file not found: {path}")
    if path.suffix == ".jsonl":
        rows = read_jsonl(path, what="records")
        return [record_from_row(row, f"{path} record {i + 1}") for i, row in enumerate(rows)]
    if path.stat().st_size > MAX_JSON_ARRAY_BYTES:
        raise MalformedRowError(f"{path}: larger than {MAX_JSON_ARRAY_BYTES >> 20} MiB; save it as JSONL instead")
    rows = read_json(path, MalformedRowError)
    if not isinstance(rows, list):
        raise MalformedRowError(f"{path}: expected a JSON array of records, got {type(rows).__name__}")
    if not rows:  # the rule of every data file (core/jsonl.py): nothing to train or evaluate on is an error
        raise MalformedRowError(f"{path}: no records")
    return [record_from_row(row, f"{path} record {i + 1}") for i, row in enumerate(rows)]


def load_hotpotqa(data_path: str | Path | None = None, split: str = "validation",
                  subset: tuple[int, int] | None = None) -> list[HotpotQARecord]:
    """HotpotQA records from `data_path` (a .jsonl or .json file, or a folder: every such file in it,
    in name order, a question seen twice kept once), or from the hub (`hotpot_qa`, distractor, `split`)
    when it is None. `subset`: (start, stop) of the records to keep."""
    if data_path is None:
        rows = load_rows("HotpotQA", None, split, HUB_ID, HUB_CONFIG, ("question", "answer", "context"))
        records = [record_from_row(row, f"hub record {i + 1}") for i, row in enumerate(rows)]
    else:
        path = Path(data_path).expanduser()
        files = sorted(p for p in path.iterdir() if p.suffix in (".jsonl", ".json")) if path.is_dir() else [path]
        if not files:
            raise DataFileNotFoundError(f"no .jsonl or .json HotpotQA file in {path}")
        records, seen = [], set()
        for file in files:
            for record in read_hotpotqa_file(file):
                if record.id not in seen:
                    seen.add(record.id)
                    records.append(record)
    if subset is not None:
        start, stop = check_subset(subset, len(records))
        records = records[start:stop]
    return records


def held_out_ranges(total: int, hold_out: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(training range, held-out range), each [start, stop), of `total` questions in load order: the last
    `hold_out` are held out (never trained on, never in an SFT transcript), as examples/rag_grpo.py holds
    back its last --holdout. Either range, when not empty, is a `subset` for `load_hotpotqa` or an env.
    ValueError (one line) unless 0 <= hold_out < total."""
    for name, value in (("total", total), ("hold_out", hold_out)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0; got {value!r}")
    if hold_out >= total:
        raise ValueError(f"holding out {hold_out} of {total} question(s) leaves none to train on; hold out fewer")
    return (0, total - hold_out), (total - hold_out, total)
