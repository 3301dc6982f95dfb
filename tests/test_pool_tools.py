"""benchmarks/pool_at_n.py (rules at n from a saved pool, by hand) and benchmarks/ranked_verifier.py (the ORM
against orm_ranked on held-out problems' second-policy samples: its split, and a tiny run end to end)."""
from __future__ import annotations

import gzip
import json

import pytest

from lmgym.traindata.step_data import LabelledSample, PolicyLabels, save_policy_labels
from tests.test_issue36_gpu import load
from tests.tiers import slow
from tests.tiny_models import save_tiny_model_dir


def pool_record(answers, correct, default, critic):
    return {"kind": "search", "index": 0, "id": "p", "gold": "1",
            "samples": {"answers": answers, "correct": correct, "tokens": [4] * len(answers),
                        "scores": {"default": default, "critic": critic}}}


def test_the_rules_at_n_read_the_first_n_samples_by_hand(tmp_path, capsys):
    script = load("pool_at_n")
    # problem 1: the first 3 samples vote 5, 5, 1 (maj wrong); the default scorer's sums give 1 (0.9 > 0.2 + 0.1),
    # the critic's 5 (0.4 + 0.4 > 0.3); the 4th sample (1 again) is cut at n = 3. Problem 2: all right.
    records = [pool_record(["5", "5", "1", "1"], [False, False, True, True], [0.2, 0.1, 0.9, 0.9],
                           [0.4, 0.4, 0.3, 0.9]),
               pool_record(["2", "2", "2", "2"], [True] * 4, [0.5] * 4, [0.5] * 4)]
    path = tmp_path / "pool.problems.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))
    rows = {r["method"]: r for r in script.at_n(script.first_n(script.read_pool(path), 3))}
    assert rows["maj"]["accuracy"] == 0.5 and rows["weighted_maj"]["accuracy"] == 1.0
    assert rows["weighted_maj[critic]"]["accuracy"] == 0.5 and rows["best_of_n"]["accuracy"] == 1.0
    assert rows["weighted_maj"]["vs_maj"].startswith("+50.0 [")
    at_two = {r["method"]: r for r in script.at_n(script.first_n(script.read_pool(path), 2))}
    assert at_two["weighted_maj"]["accuracy"] == 0.5  # problem 1's first two samples hold no right answer
    script.main([str(path), "--n", "3"])
    printed = capsys.readouterr().out
    assert "2 problems, the first 3 samples of each: 12.0 tokens a problem, pass@3 100.0%" in printed
    assert "| default | " in printed and "AUC within problems" in printed
    with pytest.raises(SystemExit, match="--n must be >= 1, got 0"):
        script.main([str(path), "--n", "0"])
    with pytest.raises(SystemExit, match="no such file"):
        script.main([str(tmp_path / "none.jsonl")])


def test_by_operation_splits_an_arithmetic_pool_and_names_any_other_id(tmp_path, capsys):
    script = load("pool_at_n")
    assert [script.arithmetic_operation(f"arithmetic/L2/{i}") for i in (0, 8100, 16200)] == ["+", "-", "*"]
    assert script.arithmetic_operation("arithmetic/L3/100") == "++" and script.arithmetic_operation(
        "arithmetic/L4/3") == "words"
    # two sums (one all right, one all wrong) and a difference whose maj is wrong and whose default scorer is right
    records = [{**pool_record(["2"] * 2, [True] * 2, [0.5] * 2, [0.5] * 2), "id": "arithmetic/L2/0"},
               {**pool_record(["3"] * 2, [False] * 2, [0.5] * 2, [0.5] * 2), "id": "arithmetic/L2/1"},
               {**pool_record(["5", "1"], [False, True], [0.2, 0.9], [0.5, 0.5]), "id": "arithmetic/L2/8100"}]
    path = tmp_path / "pool.problems.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    script.main([str(path), "--n", "2", "--by-operation"])
    printed = capsys.readouterr().out
    whole, plus, minus = printed.split("## Problems with ")
    assert whole.startswith("3 problems") and plus.startswith("+\n\n2 problems") and minus.startswith("-\n\n1 problem,")
    assert "| maj | 50.0% | - |" in plus and "| weighted_maj | 50.0% | +0.0 [+0.0, +0.0] |" in plus
    assert "| maj | 0.0% | - |" in minus and "| weighted_maj | 100.0% | - |" in minus  # one problem: no interval
    assert "| default | 1.000 | 1.000 | 1 of 1 | 100.0% | 50.0% |" in minus
    path.write_text(json.dumps({**records[0], "id": "gsm8k/7"}) + "\n")
    with pytest.raises(SystemExit, match=r"^error: 'gsm8k/7' is not an Arithmetic problem id"):
        script.main([str(path), "--by-operation"])


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> str:
    from lmgym.policies import build_tiny_model

    return save_tiny_model_dir(tmp_path_factory, build_tiny_model)


def write_labels(folder, problems: int) -> None:
    """Both policies' labels of `problems` problems, 4 samples each: the policy right on one of every other
    problem, the second policy on two of every problem."""
    question = "What is {} + 1? Give the final answer after ####.\n"
    own, second = [], []
    for i in range(problems):
        q, pid = question.format(i), f"arithmetic/L2/{i}"
        own += [LabelledSample(q, pid, ("Add one.\n", f"#### {i + 1 if k == 0 and i % 2 else i}\n"),
                               k == 0 and i % 2 == 1, str(i)) for k in range(4)]
        second += [LabelledSample(q, pid, (f"#### {i + 1 if k < 2 else i + 2}\n",), k < 2, str(i)) for k in range(4)]
    save_policy_labels(folder / "train_L2.jsonl", PolicyLabels(own, {}))
    save_policy_labels(folder / "train_L2.second.jsonl", PolicyLabels(second, {}))


def test_ranked_verifier_holds_out_problems_and_says_a_bad_split_in_one_line(tmp_path):
    script = load("ranked_verifier")
    write_labels(tmp_path / "labels", 6)
    with pytest.raises(SystemExit, match=r"--held-out must be in 1..5 \(the labels hold 6 problems\), got 6"):
        script.main(["--labels", str(tmp_path / "labels"), "--held-out", "6", "--out", str(tmp_path / "out")])


def test_ranked_verifier_reads_a_labels_file_kept_gzipped_as_the_plain_one(tmp_path):
    script = load("ranked_verifier")
    write_labels(tmp_path / "labels", 3)
    plain = script.read_labels(tmp_path / "labels", "train_L2.second.jsonl")
    packed = tmp_path / "labels" / "train_L2.second.jsonl.gz"
    packed.write_bytes(gzip.compress((tmp_path / "labels" / "train_L2.second.jsonl").read_bytes()))
    (tmp_path / "labels" / "train_L2.second.jsonl").unlink()
    assert script.read_labels(tmp_path / "labels", "train_L2.second.jsonl") == plain and len(plain) == 12


@slow
def test_ranked_verifier_trains_both_kinds_and_judges_them_within_held_out_problems(tmp_path, tiny_model_dir):
    script = load("ranked_verifier")
    write_labels(tmp_path / "labels", 8)
    argv = ["--labels", str(tmp_path / "labels"), "--held-out", "3", "--model", tiny_model_dir, "--train_iterations",
            "2", "--pairs_per_iteration", "4", "--micro_batch_size", "4", "--out", str(tmp_path / "out"),
            "--no-progress"]
    results = script.run(script.build_parser().parse_args(argv))
    assert [r["kind"] for r in results] == ["orm", "orm_ranked"]
    for r in results:  # the last 3 problems' second-policy samples: 4 each, two right
        assert r["test_samples"] == 12 and r["problems"] == 3 and r["solution_mixed_problems"] == 3
        assert r["pass_at_n"] == 1.0 and r["sample_accuracy"] == 0.5
        assert 0 <= r["solution_within_problem_auc"] <= 1
    table = (tmp_path / "out" / "ranked.md").read_text()
    assert table.splitlines()[2].startswith("| orm | ") and table.splitlines()[3].startswith("| orm_ranked | ")
    again = script.run(script.build_parser().parse_args(argv))  # saved: read back, not trained again
    assert again == results


def test_verifier_tables_read_curves_whose_records_are_kept_gzipped(tmp_path):
    from examples.verifier_tables import read_curves

    (tmp_path / "L2.json").write_text(json.dumps({"rows": [{"method": "maj", "budget": 96, "accuracy": 0.5}]}))
    runs = [{"method": "maj", "budget": 96, "correct": True}]
    packed = json.dumps({"kind": "search_curves", "index": 0, "runs": runs}) + "\n"
    (tmp_path / "L2.problems.jsonl.gz").write_bytes(gzip.compress(packed.encode()))
    rows, records = read_curves(tmp_path, 2)
    assert rows[0]["accuracy"] == 0.5 and records == [{"kind": "search_curves", "index": 0, "runs": runs}]
