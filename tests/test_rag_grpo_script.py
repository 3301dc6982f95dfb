"""examples/rag_grpo.py's own parts (its end-to-end run needs the RAG env and the document store: see
the integration tests): the flags, the held-out split of the questions and the before/after report."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.test_examples import load_script as load_example

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "rag_grpo.py"


def load_script():
    return load_example(SCRIPT)


def test_help_documents_every_flag_with_each_presets_values(capsys):
    with pytest.raises(SystemExit):
        load_script().build_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--full_finetune", "--index", "--rebuild_index", "--embedder", "--no_dense", "--search_method",
                 "--fusion", "--k ", "--max_searches", "--holdout", "--lora_r", "--reward_combination"):
        assert flag in text, flag
    assert "combined over each batch (default uniform)" in text  # this script's default, the seed's
    assert "default: cpu 2, gpu 100" in text  # train_iterations per preset


def test_the_last_questions_are_held_out(shared_data):
    path = shared_data / "hotpotqa" / "hotpot_dev_distractor_v1_first53.json"
    if not path.is_file():
        pytest.skip(f"{path} is not present")
    script = load_script()
    assert script.question_ranges(str(path), 10) == (53, (0, 43), (43, 53))
    assert script.question_ranges(str(path), 500) == (53, (0, 27), (27, 53))  # at most half
    with pytest.raises(ValueError, match="--holdout must be >= 1"):
        script.question_ranges(str(path), 0)


def test_the_report_gives_mrr_em_and_f1_first_evaluation_to_last(capsys):
    rows = [{"iteration": 0, "eval_reward_mrr": 0.25, "eval_reward_em": 0.0, "eval_reward_f1": 0.1},
            {"iteration": 1, "reward_mean": 0.3},
            {"iteration": 2, "eval_reward_mrr": 0.5, "eval_reward_em": 0.125, "eval_reward_f1": 0.2}]
    load_script().report(rows, 8)
    assert capsys.readouterr().out.strip() == ("held-out (8 questions, iteration 0 -> 2): MRR of its searches "
                                               "0.250 -> 0.500, EM 0.000 -> 0.125, F1 0.100 -> 0.200")
