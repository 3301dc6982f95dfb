"""The embedded model's cache is built once, whole, even when several processes (torchrun ranks) ask at once."""
from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

from lmgym.policies.loading.models import build_once
from tests.distributed_worker import save_copy_run
from tests.tiers import slow
from tests.two_ranks import Job

TWO_RANK_JOBS = (Job("model_cache_copy", save_copy_run),)  # the session's one two-rank launch (tests/two_ranks.py)


def slow_build(folder: Path) -> None:
    """A stand-in for dequantising: writes its files with a pause between them, and counts its runs."""
    folder.mkdir(parents=True)
    (folder / "weights.bin").write_bytes(b"w" * 1000)
    time.sleep(0.3)  # a second process arriving now must wait, not read a half-written copy
    (folder / "config.json").write_text(f'{{"builder": {os.getpid()}}}')
    with open(folder.parent / "builds.log", "a") as log:
        log.write(f"{os.getpid()}\n")


def ask(out_dir: str, results) -> None:
    built = build_once(Path(out_dir), slow_build)
    results.put(((built / "config.json").read_text(), sorted(p.name for p in built.iterdir())))


@slow
def test_concurrent_processes_build_the_cache_once_and_all_see_it_whole(tmp_path):
    out_dir = tmp_path / "cache" / "model"
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    procs = [context.Process(target=ask, args=(str(out_dir), results)) for _ in range(3)]
    for p in procs:
        p.start()
    seen = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len((tmp_path / "cache" / "builds.log").read_text().split()) == 1  # built exactly once
    assert all(s == seen[0] for s in seen) and seen[0][1] == ["config.json", "weights.bin"]
    assert not list(out_dir.parent.glob("model.tmp*"))  # nothing half-built left beside it


def test_an_incomplete_cache_folder_is_set_aside_and_rebuilt(tmp_path):
    out_dir = tmp_path / "model"
    out_dir.mkdir()
    (out_dir / "weights.bin").write_bytes(b"half")  # a killed build: no config.json
    built = build_once(out_dir, slow_build)
    assert (built / "config.json").is_file()
    assert len(list(tmp_path.glob("model.incomplete*"))) == 1  # kept aside, not deleted, not trusted
    assert build_once(out_dir, lambda folder: (_ for _ in ()).throw(AssertionError("rebuilt"))) == out_dir


def test_a_rank_other_than_zero_writes_a_whole_copy(two_rank_jobs):
    """transformers' save_pretrained writes nothing on rank 1 once a process group exists; the first W1 run
    under torchrun on a fresh machine failed so ("wrote no config.json"). The copy must load back equal."""
    import torch

    from lmgym.policies import build_tiny_model, build_tiny_tokenizer
    from lmgym.policies.loading.models import load_model_and_tokenizer

    loaded, tok = load_model_and_tokenizer(str(two_rank_jobs.folder("model_cache_copy") / "copy"))
    expected = build_tiny_model(build_tiny_tokenizer(), seed=0).state_dict()
    assert set(loaded.state_dict()) == set(expected)
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in expected.items())
    assert loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr()  # still tied
    assert tok.pad_token == build_tiny_tokenizer().pad_token
