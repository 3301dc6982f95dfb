"""Every JSON/JSONL data reader keeps one contract (core/jsonl.py): each problem is one ValueError that reads
"<path>:<line>: <problem>", and an empty data file is "<path>: no <what>"."""
import importlib.util
import json
import re
from pathlib import Path

import pytest

from examples.pipeline_table import EVAL_FILE, load_row
from lmgym.buffers import ReplayBuffer, load_step_data
from lmgym.envs.data import read_jsonl
from lmgym.envs.hotpotqa.data import read_hotpotqa_file
from lmgym.policies.few_shot import load_examples
from lmgym.retrieval.documents import documents_from_jsonl
from lmgym.retrieval.index_files import IndexLoadError, read_manifest
from lmgym.traindata.preference_data import load_preference_pairs
from lmgym.traindata.reflection_pairs import load_triples
from lmgym.traindata.sft_data import load_sft_examples
from lmgym.traindata.step_data import load_prm800k
from lmgym.training import checkpoints as ckpt

ROOT = Path(__file__).resolve().parents[1]
DEEP = b"[" * 100_000 + b"]" * 100_000  # RecursionError in json.loads
HUGE = b'{"a": ' + b"7" * 5000 + b"}"  # over Python's 4300-digit int conversion limit
NOT_UTF8 = b'{"a": "caf\xe9"}'  # latin-1

JSONL_READERS = {  # name: (reader, file name)
    "read_jsonl": (read_jsonl, "rows.jsonl"),
    "hotpotqa .jsonl": (read_hotpotqa_file, "hotpot.jsonl"),
    "preference pairs": (load_preference_pairs, "pairs.jsonl"),
    "reflection triples": (load_triples, "triples.jsonl"),
    "SFT examples": (load_sft_examples, "sft.jsonl"),
    "PRM800K": (load_prm800k, "prm800k.jsonl"),
    "step data": (load_step_data, "steps.jsonl"),
    "documents": (documents_from_jsonl, "docs.jsonl"),
    "few-shot examples": (lambda path: load_examples(path), "shots.jsonl"),
    "replay buffer": (ReplayBuffer.load, "buffer.jsonl"),
}
BAD_LINES = {
    "nested too deeply": (DEEP, r"nested 10000[01] levels deep, more than the 100 allowed"),
    "not UTF-8": (NOT_UTF8, r"not UTF-8 text \(byte 0xe9 at offset \d+ of the file\)"),
    "huge integer": (HUGE, r"an integer with more than 4300 digits"),
}


def one_line_error(call, *args) -> str:
    with pytest.raises(ValueError) as info:
        call(*args)
    text = str(info.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("problem", BAD_LINES)
@pytest.mark.parametrize("reader", JSONL_READERS)
def test_a_bad_line_is_one_value_error_naming_file_and_line(tmp_path, reader, problem):
    read, name = JSONL_READERS[reader]
    line, message = BAD_LINES[problem]
    first = b'{"capacity": 4, "count": 1}' if reader == "replay buffer" else b""  # line 1: the header, or blank
    path = tmp_path / name
    path.write_bytes(first + b"\n" + line + b"\n")
    text = one_line_error(read, path)
    assert text.startswith(f"{path}:2: ")
    assert re.search(message, text), text


@pytest.mark.parametrize("reader", [r for r in JSONL_READERS if r != "replay buffer"])
def test_an_empty_data_file_is_an_error_naming_it(tmp_path, reader):
    read, name = JSONL_READERS[reader]
    path = tmp_path / name
    path.write_text("\n  \n")
    text = one_line_error(read, path)
    assert text.startswith(f"{path}: no "), text


@pytest.mark.parametrize("problem", BAD_LINES)
def test_whole_json_files_keep_the_contract(tmp_path, problem):
    """HotpotQA's .json, a checkpoint's MANIFEST.json, a retrieval index's manifest.json, a pipeline eval.json."""
    content, message = BAD_LINES[problem]
    hotpot = tmp_path / "hotpot.json"
    hotpot.write_bytes(b"[\n" + content + b"\n]")
    text = one_line_error(read_hotpotqa_file, hotpot)
    assert text.startswith(f"{hotpot}") and re.search(message, text), text

    checkpoint = tmp_path / "checkpoint-1"
    checkpoint.mkdir(parents=True)
    (checkpoint / ckpt.MANIFEST).write_bytes(content)
    with pytest.raises(ckpt.CorruptCheckpointError, match="unreadable manifest"):
        ckpt.verify(checkpoint)

    index = tmp_path / "index"
    index.mkdir()
    (index / "manifest.json").write_bytes(content)
    with pytest.raises(IndexLoadError, match="corrupt manifest"):
        read_manifest(index)

    stage = tmp_path / "stage"  # the pipeline table's saved row: an unreadable one is measured again
    stage.mkdir()
    (stage / EVAL_FILE).write_bytes(content)
    assert load_row(stage, {}) is None

    adapter = tmp_path / "adapter"  # examples/merge_lora.py reads the adapter's config for its base model
    adapter.mkdir()
    (adapter / "adapter_config.json").write_bytes(content)
    with pytest.raises(ValueError, match="unreadable adapter config"):
        example("merge_lora").recorded_base(adapter)


def test_an_empty_hotpotqa_json_array_is_an_error(tmp_path):
    path = tmp_path / "hotpot.json"
    path.write_text("[]")
    assert one_line_error(read_hotpotqa_file, path) == f"{path}: no records"


def example(name: str):
    """examples/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(f"{name}_example", ROOT / "examples" / f"{name}.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_sft_script_prints_one_line_for_a_deeply_nested_data_file(tmp_path):
    data = tmp_path / "deep.jsonl"
    data.write_bytes(json.dumps({"prompt": "p", "completion": "c"}).encode() + b"\n" + DEEP + b"\n")
    with pytest.raises(SystemExit) as info:
        example("sft").main(["--model", "unused-model-name", "--data", str(data),
                             "--output_dir", str(tmp_path / "run")])
    assert info.value.code == f"error: {data}:2: nested 100000 levels deep, more than the 100 allowed"
