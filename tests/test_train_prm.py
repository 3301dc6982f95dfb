"""examples/train_prm.py end to end on the tiny model (every data source, 2 iterations), and its one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_examples import error_line, load_script, metrics
from tests.tiers import slow
from tests.tiny_models import save_tiny_model_dir

TRAIN_PRM = Path(__file__).resolve().parents[1] / "examples" / "train_prm.py"


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> str:
    from lmgym.policies import build_tiny_model

    return save_tiny_model_dir(tmp_path_factory, build_tiny_model)


@slow
def test_train_prm_builds_every_source_trains_and_saves_the_prm(tiny_model_dir, shared_data, tmp_path, capsys):
    from lmgym.buffers.step_pairs import load_step_data
    from lmgym.policies.prm import ProcessRewardModel

    gsm8k = shared_data / "gsm8k" / "train.jsonl"
    if not gsm8k.is_file():
        pytest.skip(f"{gsm8k} is not present")
    prm800k = tmp_path / "prm800k.jsonl"  # one short record of the official format (the loader's test reads the sample)
    step = {"completions": [{"text": "1 + 1 = 2", "rating": 1, "flagged": False},
                            {"text": "1 + 1 = 3", "rating": -1, "flagged": False}],
            "human_completion": None, "chosen_completion": 0}
    prm800k.write_text(json.dumps({"question": {"problem": "What is 1 + 1?", "ground_truth_answer": "2"},
                                   "label": {"steps": [step], "finish_reason": "solution"}}) + "\n")
    run_dir = tmp_path / "run"
    load_script(TRAIN_PRM).main([
        "--preset", "cpu", "--model", tiny_model_dir, "--arithmetic_levels", "3", "--arithmetic_problems", "4",
        "--gsm8k_path", str(gsm8k), "--gsm8k_rows", "2", "--prm800k_path", str(prm800k),
        "--shepherd_problems", "2", "--shepherd_solutions", "2", "--shepherd_rollouts", "2",
        "--shepherd_max_new_tokens", "6", "--shepherd_max_steps", "2", "--held_out_fraction", "0.3",
        "--train_iterations", "2",
        "--pairs_per_iteration", "4", "--micro_batch_size", "4", "--no-eval_at_start", "--no-progress",
        "--save_data", str(tmp_path / "items.jsonl"), "--output_dir", str(run_dir)])
    out = capsys.readouterr().out
    for source in ("arithmetic_wrong_number (pair)", "gsm8k_dropped_step (pair)", "prm800k (pair) 1",
                   "prm800k (rated) 2", "shepherd (rated) 4"):
        assert source in out, out
    saved = load_step_data(tmp_path / "items.jsonl")
    sources = {item.source for item in saved}
    assert sources >= {"arithmetic_wrong_operation", "gsm8k_wrong_number", "prm800k", "shepherd"}
    rows = metrics(run_dir)
    assert [r["iteration"] for r in rows] == [1, 2] and 0.0 <= rows[-1]["eval_pairwise_accuracy"] <= 1.0
    assert f"held-out pairwise accuracy: {rows[-1]['eval_pairwise_accuracy']:.3f} (iteration 2)" in out
    config = json.loads((run_dir / "config.json").read_text())
    assert config["pairs_per_iteration"] == 4 and config["train_iterations"] == 2
    prm = ProcessRewardModel.from_pretrained(run_dir / "prm", device="cpu")
    scores = prm.score_steps("What is 2 + 3? Give the final answer after ####.\n", ["2 + 3 = 5\n", "#### 5\n"])
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores)


def test_train_prm_bad_data_flags_are_one_line_before_any_model(tmp_path):
    script = load_script(TRAIN_PRM)
    out = ["--preset", "cpu", "--model", str(tmp_path / "no_model"), "--output_dir", str(tmp_path / "run")]
    assert error_line(script, [*out, "--arithmetic_levels", ""]) == (
        "error: no step data: give --arithmetic_levels, --gsm8k_path, --prm800k_path or --shepherd_problems")
    assert error_line(script, [*out, "--arithmetic_levels", "3,x"]) == (
        "error: --arithmetic_levels must be comma-separated integers, got '3,x'")
    assert error_line(script, [*out, "--shepherd_problems", "-1"]) == "error: --shepherd_problems must be >= 0, got -1"
    assert "PRMConfig.pairs_per_iteration must be a positive integer" in error_line(
        script, [*out, "--pairs_per_iteration", "0"])
