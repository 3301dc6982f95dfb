"""Per-problem records beside every evaluation's aggregates, the unbiased pass@k from n samples beside any@k,
and benchmarks/report.py recomputing the aggregates from the records."""
import gzip
import json
import math
import sys
from pathlib import Path

import pytest

from lmgym.buffers import Trajectory
from lmgym.core.jsonl import MalformedRowError
from lmgym.core.problem_records import (
    aggregate_of,
    problems_path,
    read_problem_records,
    saved_records,
    write_problem_records,
)
from lmgym.evaluation.evaluate import evaluate, pass_at_k
from tests.test_retrieval_scripts import load_script

REPORT = Path(__file__).resolve().parents[1] / "benchmarks" / "report.py"


def test_pass_at_k_against_hand_computed_values_and_its_edge_cases():
    comb = math.comb
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - comb(3, 2) / comb(5, 2))  # 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 1, 3) == pytest.approx(0.6)  # 1 - C(4,3)/C(5,3) = 1 - 4/10
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)  # 1 - C(7,5)/C(10,5)
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)  # k = 1: the share correct
    assert pass_at_k(1000, 1, 1) == pytest.approx(0.001)  # large n: the product form stays exact
    assert pass_at_k(2000, 3, 100) == pytest.approx(1 - comb(1997, 100) / comb(2000, 100), rel=1e-9)
    # the edge cases
    assert pass_at_k(5, 0, 2) == 0.0  # c = 0: nothing to draw
    assert pass_at_k(5, 4, 2) == 1.0  # n - c = 1 < k: every draw of 2 holds a correct one
    assert pass_at_k(5, 5, 5) == 1.0
    assert pass_at_k(3, 1, 3) == 1.0  # n = k: "any of the k"
    for n, c, k in ((3, 1, 4), (3, 4, 1), (3, -1, 1), (3, 1, 0)):
        with pytest.raises(ValueError, match=f"n={n}, c={c}, k={k}"):
            pass_at_k(n, c, k)


# two problems, five samples each: (parsed answer, correct)
PLAN = {0: [("3", True), ("4", False), ("4", False), ("5", False), ("4", False)],   # c = 1, first sample right
        1: [("7", False), ("8", False), ("9", True), ("9", True), ("6", False)]}    # c = 2, first two wrong


class Problems:
    num_problems = 2


@pytest.fixture
def scripted_rollout(monkeypatch):
    """lmgym.evaluation.evaluate's rollout replaced by one that plays PLAN (each start's samples, in order)."""
    def rollout(env, policy, starts, n, settings, generator, first_group_id=0, **_):
        out = []
        for start in starts:
            i = start["options"]["index"]
            for answer, right in PLAN[i][:n]:
                info = {"correct": right, "parsed_answer": answer, "gold": f"G{i}", "problem_id": f"p/{i}"}
                out.append(Trajectory([1], [2, 3], [-1.0, -1.0], [1, 1], reward=float(right), info=info))
        return out

    # the module, not the function lmgym.evaluation.evaluate
    monkeypatch.setattr(sys.modules["lmgym.evaluation.evaluate"], "rollout", rollout)


def test_evaluate_reports_the_unbiased_pass_at_k_from_n_samples_beside_any_at_k(scripted_rollout, tmp_path):
    result = evaluate(None, Problems(), episodes=2, k=2, samples=5, temperature=1.0,
                      records_path=tmp_path / "eval.json")
    assert result["pass@2"] == pytest.approx((0.4 + 0.7) / 2)  # 1 - C(4,2)/C(5,2), 1 - C(3,2)/C(5,2)
    assert result["any@2"] == pytest.approx(0.5)  # problem 0's first two hold a right one, problem 1's do not
    assert result["maj@2"] == pytest.approx(0.5)  # "3" vs "4": tie, first seen ("3", right); "7" vs "8": wrong
    assert result["accuracy"] == pytest.approx(3 / 10) and result["samples"] == 5.0
    records = read_problem_records(tmp_path / "eval.problems.jsonl")
    assert [(r["index"], r["id"], r["gold"], r["n"], r["c"], r["k"]) for r in records] == [
        (0, "p/0", "G0", 5, 1, 2), (1, "p/1", "G1", 5, 2, 2)]
    assert records[1]["predictions"] == ["7", "8", "9", "9", "6"] and records[1]["correct"] == [
        False, False, True, True, False]
    # the records recompute the aggregate, by hand
    assert result["pass@2"] == pytest.approx(sum(pass_at_k(r["n"], r["c"], 2) for r in records) / 2)
    assert result["any@2"] == pytest.approx(sum(any(r["correct"][:2]) for r in records) / 2)


def test_with_n_equal_k_pass_at_k_is_any_at_k_and_fewer_samples_than_k_is_refused(scripted_rollout):
    result = evaluate(None, Problems(), episodes=2, k=2, temperature=1.0)
    assert result["pass@2"] == result["any@2"] == 0.5 and "samples" not in result
    with pytest.raises(ValueError, match="samples=1 is fewer than k=2"):
        evaluate(None, Problems(), episodes=2, k=2, samples=1, temperature=1.0)


def test_the_records_writer_names_the_file_beside_its_aggregate_and_bad_files_are_one_line(tmp_path):
    assert problems_path(tmp_path / "eval.json") == tmp_path / "eval.problems.jsonl"
    path = write_problem_records(tmp_path / "sub" / "verifier_eval.json", "sampled", [{"index": 0}])
    assert path == tmp_path / "sub" / "verifier_eval.problems.jsonl"
    assert read_problem_records(path) == [{"kind": "sampled", "index": 0}]
    with pytest.raises(ValueError, match="no problem records to write"):
        write_problem_records(tmp_path / "empty.json", "sampled", [])
    path.write_text('{"index": 0}\n')
    with pytest.raises(MalformedRowError, match=r"verifier_eval.problems.jsonl:1: missing field 'kind'"):
        read_problem_records(path)


def test_records_kept_gzipped_are_found_and_read_and_the_writer_names_the_kind(tmp_path):
    aggregate = tmp_path / "eval.json"
    assert saved_records(aggregate) is None
    packed = tmp_path / "eval.problems.jsonl.gz"
    packed.write_bytes(gzip.compress(b'{"kind": "sampled", "index": 0}\n\n{"kind": "sampled", "index": 1}\n'))
    assert saved_records(aggregate) == packed
    assert aggregate_of(packed) == aggregate and aggregate_of(tmp_path / "eval.problems.jsonl") == aggregate
    assert read_problem_records(packed) == [{"kind": "sampled", "index": 0}, {"kind": "sampled", "index": 1}]
    plain = write_problem_records(aggregate, "sampled", [{"index": 2}])
    assert saved_records(aggregate) == plain  # the plain file first when both are kept
    # a record read from another kind's file is written under the writer's kind, not the one it carries
    write_problem_records(aggregate, "search_curves", [{"kind": "search", "index": 3}])
    assert read_problem_records(plain) == [{"kind": "search_curves", "index": 3}]
    with pytest.raises(ValueError, match="written as plain .problems.jsonl; gzip the file afterwards"):
        write_problem_records(packed, "sampled", [{"index": 0}])
    # a damaged gzip file is one line naming it; a line inside it as in a plain file
    for name, data in (("cut", gzip.compress(b'{"kind": "sampled"}\n' * 50)[:-9]), ("notgzip", b"plain text\n")):
        bad = tmp_path / f"{name}.problems.jsonl.gz"
        bad.write_bytes(data)
        with pytest.raises(MalformedRowError, match=rf"^{bad}: not a readable gzip file \(.+\)$"):
            read_problem_records(bad)
    packed.write_bytes(gzip.compress(b'{"kind": "sampled"}\n{"index": 0}\n'))
    with pytest.raises(MalformedRowError, match=r"eval.problems.jsonl.gz:2: missing field 'kind'"):
        read_problem_records(packed)


def assert_report_recomputes(folder: Path, expected_files: int) -> str:
    """benchmarks/report.py on `folder`: every recomputed number equals its aggregate; returns the report."""
    text, ok = load_script(REPORT).report(folder)
    assert ok, text
    assert f"{expected_files} per-problem record file(s)" in text, text
    assert "| NO |" not in text and "| yes |" in text
    return text


def assert_tampering_is_caught(aggregate: Path, change, row_text: str, folder: Path) -> None:
    """Copy `aggregate` and its records file into `folder`, rewrite one of its numbers there with `change`
    (called on the JSON data): report.py shows `row_text` (a NO row) and exits 1."""
    folder.mkdir(parents=True)
    data = json.loads(aggregate.read_text())
    change(data)
    (folder / aggregate.name).write_text(json.dumps(data))
    (folder / problems_path(aggregate).name).write_bytes(problems_path(aggregate).read_bytes())
    script = load_script(REPORT)
    text, ok = script.report(folder)
    assert not ok and row_text in text, text
    assert script.main([str(folder)]) == 1


def test_report_recomputes_the_aggregates_of_a_tiny_evaluation_and_lists_aggregates_only(
        scripted_rollout, tmp_path):
    from lmgym.envs import ReflectionEnv
    from lmgym.evaluation.reflection_metrics import evaluate_reflection
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
    from tests.test_reflection import REFINE, FixedTask, ScriptedRole

    results = tmp_path / "results"
    sampled = evaluate(None, Problems(), episodes=2, k=2, samples=5, temperature=1.0,
                       records_path=problems_path(results / "sampled" / "eval.json"))
    (results / "sampled" / "eval.json").write_text(json.dumps(sampled))
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    players = {"actor": ScriptedRole(policy, lambda seen, k: "#### 3" if REFINE in seen else "#### 2"),
               # the critic approves the first answer (2) and rejects the refined one (3)
               "critic": ScriptedRole(policy, lambda seen, k: "That is wrong." if "#### 3" in seen else "Right.")}
    reflection = evaluate_reflection(players, ReflectionEnv(FixedTask(), max_turns=3), episodes=3, turns=3,
                                     records_path=results / "reflection" / "eval.problems.jsonl")
    (results / "reflection" / "eval.json").write_text(json.dumps(reflection))
    (results / "old_gpu_run").mkdir()
    (results / "old_gpu_run" / "eval.json").write_text(json.dumps({"accuracy": 0.9}))

    text = assert_report_recomputes(results, 2)
    for metric, value in (("pass@2", 0.55), ("any@2", 0.5), ("maj@2", 0.5), ("p1@t1", 1 / 3), ("p1@t3", 2 / 3)):
        assert f"| {metric} | {value:.4f} | {value:.4f} | yes |" in text, metric
    # the critic's rates from each record's verdicts: golds 2, 3, 7; answers 2, 3, 3; approve then reject
    for metric, value in (("critic_false_alarm", 0.5), ("critic_miss", 0.5), ("critic_unclear", 0.0),
                          ("keep_after_approve", 0.0), ("fix_after_reject", 0.0), ("break_after_alarm", 0.0),
                          ("break_after_approve", 1.0)):
        assert f"| {metric} | {value:.4f} | {value:.4f} | yes |" in text, metric
    assert "old_gpu_run/eval.json: aggregates only: rerun to recompute" in text
    assert "sampled/eval.json: aggregates only" not in text

    # an aggregate that its records do not give is caught, and the command exits 1
    (results / "sampled" / "eval.json").write_text(json.dumps({**sampled, "pass@2": 0.6}))
    script = load_script(REPORT)
    text, ok = script.report(results)
    assert not ok and "| pass@2 | 0.5500 | 0.6000 | NO |" in text
    assert script.main([str(results)]) == 1

    def fewer_false_alarms(data):
        data["critic_false_alarm"] = 0.25

    assert_tampering_is_caught(results / "reflection" / "eval.json", fewer_false_alarms,
                               "| critic_false_alarm | 0.5000 | 0.2500 | NO |", tmp_path / "tampered")
