"""benchmarks/w4_multistep.py: the wall-time split on hand-made traces, and one tiny end-to-end run on the CPU
(every workload, its JSON fields, shares summing to 1, the --compare table)."""
import gc
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from lmgym.policies.decoding.bucket_admission import replay
from tests.tiers import slow

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from w4_multistep import config_overrides, set_decoder  # noqa: E402
from w4_phases import (  # noqa: E402
    PHASES,
    GcPauses,
    RangeClock,
    activity,
    flatten,
    host_ops_by_phase,
    kernels_by_phase,
    phase_of,
    split_wall,
    trace_events,
)

SCRIPT = ROOT / "benchmarks" / "w4_multistep.py"


def event(device, name, start, end, corr=0, linked=0, annotation=False, thread=1):
    """A raw Kineto event as torch 2.11 gives it (no activity_type)."""
    return SimpleNamespace(device_type=lambda: f"DeviceType.{device}", name=lambda: name,
                           is_user_annotation=lambda: annotation, start_ns=lambda: start, end_ns=lambda: end,
                           correlation_id=lambda: corr, linked_correlation_id=lambda: linked,
                           start_thread_id=lambda: thread)


def profile_of(events):
    """A finished profile holding `events`, as the analysis reads it."""
    return SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events)))


def test_gpu_busy_time_goes_to_the_launching_phase_and_idle_time_to_the_host_phase():
    ranges = [(0, 1000, 1, "w4.chunk"), (100, 600, 1, "lmgym.sample"), (100, 200, 1, "lmgym.prefill"),
              (200, 220, 1, "lmgym.decode"), (300, 320, 1, "lmgym.decode"), (400, 500, 1, "lmgym.stop_strings"),
              (600, 900, 1, "lmgym.env"), (700, 750, 1, "lmgym.tokenize"), (800, 850, 1, "lmgym.retrieval")]
    kernels = [(150, 250, 150, 1),   # launched in the prefill
               (250, 450, 210, 1),   # in a decode step; it runs on while the host checks stop strings
               (550, 560, 550, 1),   # by the sampler outside its named ranges: decode
               (820, 830, 820, 1),   # inside a range of another name within env (retrieval): env
               (950, 960, -1, -1)]   # launch not found: host
    split = split_wall(ranges, kernels, main=1)
    seconds = {p: round(v * 1e9) for p, v in split["phases_s"].items()}
    assert seconds == {"prefill": 150, "decode": 210, "stop_strings": 50, "sample_host": 90, "env": 250,
                       "tokenize": 50, "train": 0, "host": 200}
    assert split["gpu_busy_share"] == pytest.approx(0.33)
    assert split["gpu_busy_by_phase"] == pytest.approx({"prefill": 0.1, "decode": 0.21, "env": 0.01, "unlinked": 0.01})
    assert sum(split["phases"].values()) == pytest.approx(1.0)
    assert split["kernels_linked_share"] == pytest.approx(0.8)


def test_kernels_of_a_thread_without_ranges_and_other_threads_ranges():
    ranges = [(0, 100, 1, "w4.chunk"), (10, 60, 1, "w4.train"), (70, 90, 3, "lmgym.env")]
    kernels = [(20, 50, 20, 2)]  # launched by a thread with no ranges (autograd's): the main thread's phase
    split = split_wall(ranges, kernels, main=1)
    assert {p: round(v * 1e9) for p, v in split["phases_s"].items() if v} == {"train": 50, "env": 20, "host": 30}


def test_flatten_keeps_the_innermost_range_and_cuts_one_that_outlives_its_parent():
    starts, ends, phases = flatten([(0, 10, "lmgym.sample"), (2, 4, "lmgym.decode"), (8, 12, "lmgym.prefill")])
    names = [PHASES[p] for p in phases]
    assert list(zip(starts.tolist(), ends.tolist(), names)) == [
        (0, 2, "sample_host"), (2, 4, "decode"), (4, 8, "sample_host"), (8, 10, "prefill")]


def test_the_host_clock_counts_self_time(monkeypatch):
    import w4_phases

    ticks = iter([0.0, 1.0, 3.0, 4.0, 4.0, 6.0])  # sample in, decode in and out, sample out, env in and out
    monkeypatch.setattr(w4_phases, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    clock = RangeClock()
    before = clock.snapshot()
    clock.enter("lmgym.sample")
    clock.enter("lmgym.decode")
    clock.exit()
    clock.exit()
    clock.enter("lmgym.env")
    clock.exit()
    spent = RangeClock.split(before, clock.snapshot(), wall=10.0)
    assert spent == {"prefill": 0.0, "decode": 2.0, "stop_strings": 0.0, "sample_host": 2.0, "env": 2.0,
                     "tokenize": 0.0, "train": 0.0, "host": 4.0}


def tiny_data(tmp_path: Path) -> tuple[Path, Path]:
    """A HotpotQA file (the toy records, official layout) and a GSM8K file of two rows."""
    from rag_toys import RECORDS

    rows = [{"_id": r.id, "question": r.question, "answer": r.answer, "type": r.type, "level": r.level,
             "supporting_facts": [list(f) for f in r.supporting_facts],
             "context": [[title, list(sentences)] for title, sentences in r.context]} for r in RECORDS]
    hotpot = tmp_path / "hotpot.json"
    hotpot.write_text(json.dumps(rows))
    gsm8k = tmp_path / "gsm8k.jsonl"
    gsm8k.write_text("".join(json.dumps({"question": f"Tom has {n} apples and buys 2. How many now?",
                                         "answer": f"{n} + 2 = {n + 2}\n#### {n + 2}"}) + "\n" for n in (3, 5)))
    return hotpot, gsm8k


def test_raw_events_are_classified_without_activity_type():
    """torch 2.11 (the GPU image's) has no _KinetoEvent.activity_type: the kind comes from the device type, the
    annotation flag and the name."""
    def event(device, annotation=False, name="aten::mm"):
        return SimpleNamespace(device_type=lambda: f"DeviceType.{device}", is_user_annotation=lambda: annotation,
                               name=lambda: name)

    assert activity(event("CUDA")) == "kernel"
    # a host range's mirror on the GPU lane spans its kernels: counted as a kernel, it made W4's profiled
    # chunks ~90% busy where NVML saw 44-66%
    assert activity(event("CUDA", name="lmgym.decode"), frozenset({"lmgym.decode"})) == "gpu_user_annotation"
    assert activity(event("CUDA", name="sm90_gemm"), frozenset({"lmgym.decode"})) == "kernel"
    assert activity(event("CPU", annotation=True, name="lmgym.decode")) == "user_annotation"
    assert activity(event("CPU", name="cudaLaunchKernel")) == "cuda_runtime"
    assert activity(event("CPU")) == "cpu_op"
    assert activity(SimpleNamespace(activity_type=lambda: "gpu_memcpy")) == "gpu_memcpy"


def test_a_ranges_mirror_on_the_gpu_lane_is_not_counted_as_busy_time():
    """On torch 2.11 a record_function range also appears on the GPU lane, spanning the kernels launched in it;
    read as a kernel, it made every W4 chunk ~90% busy (NVML: 44-66%). Only the real kernel is busy here."""
    events = [event("CPU", "w4.chunk", 0, 1000, corr=1, annotation=True),
              event("CPU", "lmgym.decode", 100, 600, corr=2, annotation=True),
              event("CPU", "aten::mm", 150, 160, corr=3),
              event("CUDA", "sm90_gemm", 200, 300, linked=3),                # the kernel: 10% of the chunk
              event("CUDA", "lmgym.decode", 200, 900), event("CUDA", "w4.chunk", 0, 1000)]  # the mirrors
    prof = profile_of(events)
    split = split_wall(*trace_events(prof))
    assert split["gpu_busy_share"] == pytest.approx(0.1)
    assert split["gpu_busy_by_phase"] == pytest.approx({"decode": 0.1})


def test_host_ops_are_counted_per_phase_with_launches_and_syncs_apart():
    """The profiled chunk's host calls by phase: W4b's train phase idled the GPU 75% of its time, and this says
    whether the host was launching (many small kernels) or waiting (syncs)."""
    def cpu(name, start, end, annotation=False, thread=1):
        return event("CPU", name, start, end, annotation=annotation, thread=thread)

    events = [cpu("w4.chunk", 0, 1000, annotation=True), cpu("w4.train", 100, 900, annotation=True),
              cpu("aten::mm", 110, 130), cpu("cudaLaunchKernel", 115, 125), cpu("cudaLaunchKernel", 140, 150),
              cpu("cudaStreamSynchronize", 200, 400), cpu("aten::add", 950, 960),
              cpu("aten::mm", 120, 122, thread=2)]  # another thread's (CUDA's backward): the main one's phase
    prof = profile_of(events)
    ranges, _, main = trace_events(prof)
    ops = host_ops_by_phase(prof, ranges, main)
    train = ops["train"]
    assert train["launches"] == [2, pytest.approx(20e-9)] and train["syncs"] == [1, pytest.approx(200e-9)]
    assert train["ops_total"] == 5 and list(train["ops"])[0] == "cudaStreamSynchronize"
    assert train["ops"]["aten::mm"][0] == 2
    assert ops["host"]["ops_total"] == 1 and set(ops) == {"train", "host"}


def test_continuous_plays_turn_extension_is_prefill_work():
    """An env turn fed in one pass (lmgym.extend, inside lmgym.sample) is prefill, not the sampler's host work: read
    as the latter, it hid W4b's extension passes in the sampler's share."""
    assert PHASES[phase_of("lmgym.extend", PHASES.index("sample_host"))] == "prefill"
    assert PHASES[phase_of("lmgym.continue", PHASES.index("sample_host"))] == "sample_host"


def test_kernels_are_summed_per_phase_of_their_launch():
    events = [event("CPU", "w4.chunk", 0, 1000, corr=1, annotation=True),
              event("CPU", "lmgym.prefill", 100, 300, corr=2, annotation=True),
              event("CPU", "aten::mm", 110, 120, corr=3), event("CPU", "aten::mm", 130, 140, corr=4),
              event("CPU", "aten::add", 500, 510, corr=5),
              event("CUDA", "sm90_gemm", 200, 260, linked=3), event("CUDA", "sm90_gemm", 260, 300, linked=4),
              event("CUDA", "elementwise", 520, 530, linked=5), event("CUDA", "stray", 600, 605, linked=99),
              event("CUDA", "lmgym.prefill", 200, 300)]  # the range's mirror: not a kernel
    prof = profile_of(events)
    ranges, _, main = trace_events(prof)
    out = kernels_by_phase(prof, ranges, main)
    assert set(out) == {"prefill", "host", "unlinked"}
    assert out["prefill"]["kernels"] == 2 and out["prefill"]["seconds"] == pytest.approx(100e-9)
    assert out["prefill"]["top"]["sm90_gemm"][0] == 2
    assert out["host"]["top"] == {"elementwise": [1, pytest.approx(0.0, abs=1e-6)]}


@slow
def test_the_collectors_pauses_are_counted_while_installed():
    with GcPauses() as pauses:
        gc.collect()
        gc.freeze()
        try:
            gc.collect()
        finally:
            gc.unfreeze()
    assert pauses.collections[2] >= 2 and pauses.full_seconds > 0 and pauses.seconds >= pauses.full_seconds
    # each full collection is recorded with the objects frozen when it began: the whole heap walked (the interpreter's
    # own frozen objects at most: Python 3.12 starts with some), then far fewer walked
    assert pauses.full[-1]["frozen"] > pauses.full[0]["frozen"]
    gc.collect()  # uninstalled: not counted
    assert pauses.snapshot()["collections"][2] == pauses.collections[2] == len(pauses.snapshot()["full"])


def test_decoder_settings_reach_the_workloads_fast_decoder_and_bad_ones_are_one_line():
    decoder = SimpleNamespace(cache_bytes=None, sync_every=8)
    work = SimpleNamespace(algo=SimpleNamespace(policy=SimpleNamespace(fast_decoder=decoder)))  # as W4b's
    assert set_decoder(work, ["sync_every=16"]) == {"sync_every": 16} and decoder.sync_every == 16
    assert set_decoder(work, ["cache_bytes=40000000000"]) == {"cache_bytes": 40_000_000_000}  # --decode_cache_gb 40
    assert decoder.cache_bytes == 40_000_000_000
    assert set_decoder(SimpleNamespace(policy=None), ["sync_every=16"]) is None  # no decoder: nothing set
    for bad in ("sync_every", "no_such_field=1", "sync_every=sixteen"):
        with pytest.raises(SystemExit, match="--decoder_set.*FastDecoder attribute"):
            set_decoder(work, [bad])


def test_w4b_overrides_are_grpo_config_fields():
    assert config_overrides(["gradient_checkpointing=false", "max_tokens_per_microbatch=65536",
                             "torch_compile_backend=inductor"]) == {
        "gradient_checkpointing": False, "max_tokens_per_microbatch": 65536, "torch_compile_backend": "inductor"}
    for bad in ("gradient_checkpointing", "no_such_field=1"):
        with pytest.raises(SystemExit, match="--w4b_set.*GRPOConfig field"):
            config_overrides([bad])


@slow
def test_a_tiny_run_reports_every_field(tmp_path):
    hotpot, gsm8k = tiny_data(tmp_path)
    out = tmp_path / "w4.json"
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    env.pop("PYTHONPATH", None)  # the script's own tree
    sizes = ["--w1_prompts", "1", "--w1_max_new", "4", "--max_new_tokens", "4", "--w4a_problems", "2",
             "--w4a_chunk", "2", "--w4a_warmup_problems", "0", "--w4a_max_steps", "2", "--w4b_questions", "1",
             "--w4c_problems", "2", "--w4c_batch", "1", "--w4c_warmup_problems", "0", "--w4c_profile_problems", "1",
             "--w4c_turns", "2",
             "--w4b_set", "max_tokens_per_microbatch=4096", "--decoder_set", "bucket_trace=[]"]
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--data_path", str(hotpot), "--gsm8k", str(gsm8k),
                           "--no_dense", "--label", "tiny", "--out", str(out), *sizes], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["label"] == "tiny" and results["code_root"] == str(ROOT)
    work = results["workloads"]
    assert work["w1"]["completion_tok_per_s"] > 0
    assert work["w4b"]["dynamo_reset_before"] is True
    for name, unit in (("w4a", "s_per_1000_episodes"), ("w4b", "s_per_iteration"), ("w4c", "s_per_1000_episodes")):
        record = work[name]
        assert "error" not in record, record.get("traceback")
        measured, profile = record["measured"], record["profile"]
        assert measured["generated_tok_per_s"] > 0 and measured["context_tok_per_s"] > measured["generated_tok_per_s"]
        assert measured[unit] > 0
        assert "peak_mem_gb" in record and "nvml_gpu_busy" in measured and "gpu_busy_share" in profile
        for split in (measured["phases_plain"], profile["phases"]):
            assert set(split) == set(PHASES)
            assert sum(split.values()) == pytest.approx(1.0, abs=0.02)
        assert profile["phases"]["decode"] > 0 and profile["phases"]["prefill"] > 0
        assert record["chunks"][0]["engine_generated_tokens"] == record["chunks"][0]["generated_tokens"]
    assert work["w4b"]["profile"]["phases"]["train"] > 0 and len(work["w4b"]["warmup"]) == 1
    assert work["w4b"]["settings"]["overrides"] == {"max_tokens_per_microbatch": 4096}
    assert work["w4b"]["settings"]["max_tokens_per_microbatch"] == 4096
    assert work["w4b"]["profile"]["host_ops"]["train"]["ops_total"] > 0
    assert work["w4b"]["measured"]["gc_s"] >= 0 and len(work["w4b"]["chunks"][0]["gc"]["collections"]) == 3
    for name in ("w4a", "w4b", "w4c"):  # what the fast decoder prefilled, shared and extended in each chunk
        decoded = work[name]["chunks"][0]["decoder"]
        assert decoded["prefill_tokens"] > 0 and set(decoded) >= {"prefill_tokens_shared", "extended_tokens"}
    assert work["w4a"]["measured"]["projected_2000_problems_min"] > 0
    # a chunk is one labelling call over its batches (--tiny's batch is one problem): two batches, one call
    assert work["w4a"]["settings"]["chunk_problems"] == 2 and work["w4a"]["settings"]["batch_size"] == 1
    assert [c["problems"] for c in work["w4a"]["chunks"]] == [2]
    for name in ("w4a", "w4b", "w4c"):  # each workload's bucket requests, replayed as the run decided them
        trace_file = tmp_path / f"w4.{name}.buckets.json"
        assert work[name]["bucket_trace"] == str(trace_file)
        trace = json.loads(trace_file.read_text())["requests"]
        outcomes = Counter(entry.get("outcome") for entry in trace)
        assert replay(trace) == {"requests": sum(outcomes[k] for k in ("hit", "kept", "transient")),
                                 "hits": outcomes["hit"], "made": outcomes["kept"] + outcomes["transient"],
                                 "evicted": replay(trace)["evicted"], "transient": outcomes["transient"]}
    replayed = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bucket_replay.py"),
                               str(tmp_path / "w4.w4a.buckets.json")], env=env, capture_output=True, text=True,
                              timeout=120)
    assert replayed.returncode == 0 and "| 1 | least recently used | - |" in replayed.stdout, replayed.stderr
    assert work["w4c"]["quality"]["episodes"] == 2.0
    assert "| w4b |" in done.stdout
    shown = subprocess.run([sys.executable, str(SCRIPT), "--compare", str(out), str(out)], env=env,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "| w4a | " in shown.stdout and "1.00x" in shown.stdout and "settings differ" not in shown.stdout
