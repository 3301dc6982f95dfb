"""examples/reflection_dpo.py end to end on the tiny model (minimal sizes): every stage (first-answer SFT,
the model's own answers, critic + refinement SFT, branched pairs, DPO), the table's three rows and per-turn
columns, the SFT and pair counts and samples, finished stages skipped on a rerun, --restart, and one-line
errors. (What the examples and pairs contain is checked on scripted policies in the library tests.)"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmgym.evaluation.reflection_critic_metrics import CRITIC_METRICS
from tests.test_examples import error_line, load_script, metrics
from tests.test_problem_records import assert_report_recomputes
from tests.tiers import slow
from tests.tiny_models import save_tiny_model_dir

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "reflection_dpo.py"
STAGES = ("base", "sft first", "sft answers", "sft", "sft eval", "pairs", "dpo", "dpo eval")


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> str:
    from lmgym.policies import build_tiny_model

    return save_tiny_model_dir(tmp_path_factory, build_tiny_model)


def triples_file(path: Path) -> Path:
    """Two recorded refinements (the tiny model's own episodes are never right, so these make the pairs):
    one wrong -> right (an actor pair), one wrong -> wrong after other feedback (with it, a critic pair)."""
    rows = [{"question": "What is 2 + 3? Give the final answer after ####.", "initial": "#### 6",
             "feedback": "Check the sum.", "refined": "2 + 3 = 5\n#### 5", "gold": 5},
            {"question": "What is 2 + 3? Give the final answer after ####.", "initial": "#### 6",
             "feedback": "Looks right.", "refined": "#### 6", "gold": "5"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def argv(model: str, out: Path, triples: Path, *extra: str) -> list[str]:
    return ["--preset", "cpu", "--model", model, "--level", "2", "--turns", "2", "--eval_episodes", "2",
            "--max_new_tokens", "4", "--sft_examples", "4", "--reflect_problems", "3", "--pair_problems", "2",
            "--pair_feedbacks", "2", "--pair_refinements", "1", "--sft_iterations", "1",
            "--reflect_sft_iterations", "1", "--dpo_iterations", "1", "--triples", str(triples), "--batch_prompts", "4",
            "--no-progress", "--output_dir", str(out), *extra]


@slow
def test_the_pipeline_writes_the_table_and_skips_finished_stages(tiny_model_dir, tmp_path, capsys):
    script, out = load_script(SCRIPT), tmp_path / "run"
    args = argv(tiny_model_dir, out, triples_file(tmp_path / "triples.jsonl"))
    script.main(args)
    first = capsys.readouterr().out
    assert all(f"[{stage}] running" in first for stage in STAGES), first

    report = json.loads((out / "reflection.json").read_text())
    assert [r["stage"] for r in report["rows"]] == ["base", "SFT", "SFT+DPO"]
    text = assert_report_recomputes(out, 3)  # <stage>/eval.problems.jsonl give each eval.json's numbers
    assert "| base/eval.problems.jsonl | reflection | m1@t2 |" in text and "aggregates only" not in text
    assert "| dpo/eval.problems.jsonl | reflection | critic_false_alarm |" in text  # the critic's rates as well
    for row in report["rows"]:
        assert set(row) == {"stage", "p1@t1", "m1@t2", "p1@t2", "tokens", "acc@t1", "acc@t2", "w2r@t2", "r2w@t2",
                            *CRITIC_METRICS}
        assert row["critic_unclear"] is not None  # every stage played one critic turn per episode
        assert 0.0 <= row["p1@t1"] <= row["p1@t2"] <= 1.0 and row["tokens"] > 0
        assert row["acc@t1"] == row["p1@t1"]  # the first turn's accuracy is p1@t1
        assert (row["w2r@t2"] is None) == (row["p1@t1"] == 1.0) and (row["r2w@t2"] is None) == (row["p1@t1"] == 0.0)
    pairs = report["pairs"]
    assert pairs["actor_from_triples"] == 1 and pairs["critic_from_triples"] == 1
    assert pairs["episodes"] == 2 * 2 * 1 and pairs["problems"] == 2  # problems x feedbacks x refinements
    for role in ("actor", "critic"):  # every context is counted: a pair, a tie or a dropped pair
        assert {f"{role}_pairs", f"{role}_ties", f"{role}_dropped_empty", f"{role}_dropped_identical",
                f"{role}_dropped_unparseable"} <= set(pairs)
    assert pairs["critic_pairs"] + pairs["critic_ties"] + sum(
        v for k, v in pairs.items() if k.startswith("critic_dropped")) >= 1
    pairs_md = (out / "pairs" / "pairs.md").read_text()
    assert pairs_md.startswith("# Reflection pairs") and f"- actor_ties: {pairs['actor_ties']}" in pairs_md
    sft = report["sft"]  # (b): the first-answer model's 3 answers, each a critic and a refinement example
    assert sft["answers"] == 3 and sft["right"] + sft["wrong"] == 3 and sft["first_answer_examples"] == 4
    assert sft["critic_examples"] == sft["refinement_examples"] == 3
    answers = [json.loads(line) for line in (out / "sft" / "answers" / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 3 and all(set(a) == {"index", "answer", "correct"} for a in answers)
    samples = (out / "sft" / "answers" / "samples.md").read_text()
    assert "## critic example (answer" in samples and "## refinement example (answer" in samples
    assert "target (trained on):" in samples
    table = (out / "reflection.md").read_text()
    assert "| stage | p1@t1 | m1@t2 | p1@t2 | tokens |" in table and table in first
    assert "| stage | " + " | ".join(CRITIC_METRICS) + " |" in table
    assert "| stage | acc@t1 | acc@t2 | w2r@t2 | r2w@t2 |" in table
    assert all(table.count(f"| {label} |") == 3 for label in ("base", "SFT", "SFT+DPO"))
    assert (out / "turn_accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for stage in ("sft_first", "sft", "dpo"):
        assert (out / stage / "model" / "config.json").is_file()
        assert [r["iteration"] for r in metrics(out / stage) if r["iteration"] > 0] == [1]
    dpo_config = json.loads((out / "dpo" / "config.json").read_text())
    assert dpo_config["train_iterations"] == 1 and dpo_config["output_dir"] == str(out / "dpo")
    actor = [json.loads(line) for line in (out / "pairs" / "actor.jsonl").read_text().splitlines()]
    assert {(p["chosen"], p["rejected"]) for p in actor} >= {("2 + 3 = 5\n#### 5", "#### 6")}

    stamp = (out / "dpo" / "model" / "config.json").stat().st_mtime_ns
    script.main(args)  # everything finished: nothing runs again, the same table
    second = capsys.readouterr().out
    assert all(f"[{stage}] finished earlier" in second for stage in STAGES) and "running" not in second, second
    assert table in second and (out / "dpo" / "model" / "config.json").stat().st_mtime_ns == stamp

    (out / "dpo" / "eval.json").unlink()  # a missing stage runs alone
    script.main(args)
    third = capsys.readouterr().out
    assert "[dpo eval] running" in third and "[dpo] finished earlier" in third and "[sft] finished earlier" in third

    (out / "sft" / "answers" / "summary.json").unlink()  # a rebuilt stage reruns the stages after it
    script.main(args)
    fourth = capsys.readouterr().out
    assert "[sft first] finished earlier" in fourth and "[base] finished earlier" in fourth
    assert all(f"[{stage}] running" in fourth for stage in STAGES[2:]), fourth

    script.main([*args, "--restart"])
    restarted = capsys.readouterr().out
    assert all(f"[{stage}] running" in restarted for stage in STAGES), restarted


def test_bad_flags_and_changed_settings_are_one_line(tiny_model_dir, tmp_path):
    script, out = load_script(SCRIPT), tmp_path / "run"
    base = argv(tiny_model_dir, out, tmp_path / "none.jsonl")
    assert error_line(script, [*base, "--pair_temperature", "0"]) == (
        "error: --pair_temperature must be > 0 (the pair episodes must differ), got 0.0")
    assert error_line(script, [*base, "--subset", "0,10"]) == (
        "error: --data_path and --subset are for Reflection-GSM8K-v0 / Reflection-MATH-v0, not "
        "Reflection-Arithmetic-v0")
    assert "SFTConfig.learning_rate" in error_line(script, [*base, "--sft_learning_rate", "-1"])
    assert error_line(script, [*base, "--turns", "1"]) == (
        "error: --turns must be >= 2 (a refinement is the second answer), got 1")
    assert error_line(script, [*base, "--pair_feedbacks", "0"]) == "error: --pair_feedbacks must be >= 1, got 0"
    assert error_line(script, [*base, "--sft_examples", "-1"]) == "error: --sft_examples must be >= 0 (0: all), got -1"
    assert error_line(script, [*base, "--answer_temperature", "-0.5"]) == (
        "error: --answer_temperature must be >= 0, got -0.5")
    assert error_line(script, [*base, "--reflect_problems", "21970"]) == (  # level 2 has 21,970 train problems
        "error: 21970 train problems, but --reflect_problems, --pair_problems and --sft_examples need 21976")
    (out).mkdir()
    (out / "settings.json").write_text(json.dumps({"level": 3}))
    assert error_line(script, base).startswith(f"error: {out} was run with other settings (")


def test_triples_load_from_jsonl_and_bad_lines_name_file_and_line(tmp_path):
    from lmgym.traindata import load_triples

    triples = load_triples(triples_file(tmp_path / "triples.jsonl"))
    assert [t.gold for t in triples] == ["5", "5"] and triples[0].feedback == "Check the sum."
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "initial": "a", "refined": "b", "gold": "1"}\n\n{"question": "q"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:3: field 'initial' must be a str$"):
        load_triples(bad)


def test_math_gold_solutions_complete_the_math_envs_prompts(shared_data):
    from lmgym.envs import make
    from lmgym.traindata.sft_data import math_sft_examples

    if not (shared_data / "math500" / "test.jsonl").is_file():
        pytest.skip("../shared/data/math500 is not present")
    examples = math_sft_examples(shared_data / "math500", (0, 2))
    env = make("Reflection-MATH-v0", data_path=shared_data / "math500", subset=(0, 2))
    assert [e.prompt for e in examples] == [env.reset(options={"index": i})[0] for i in range(2)]
    assert all("\\boxed{" in e.completion for e in examples)


@slow
def test_the_checked_critic_style_reaches_the_sft_examples(tiny_model_dir, tmp_path):
    script, out = load_script(SCRIPT), tmp_path / "run"
    script.main(argv(tiny_model_dir, out, triples_file(tmp_path / "triples.jsonl"), "--critic_style", "checked"))
    samples = (out / "sft" / "answers" / "samples.md").read_text()
    critic_targets = samples.split("## critic example")[1:]
    # the tiny model's answers state no step, so the oracle gives its generic feedback in either style; the
    # style is recorded, and a folder run in the oracle style (its settings.json has no critic_style) differs
    assert critic_targets and json.loads((out / "settings.json").read_text())["critic_style"] == "checked"
    settings = json.loads((out / "settings.json").read_text())
    del settings["critic_style"]
    (out / "settings.json").write_text(json.dumps(settings))
    assert error_line(script, argv(tiny_model_dir, out, tmp_path / "triples.jsonl", "--critic_style", "checked")) == (
        f"error: {out} was run with other settings (critic_style); pass --restart to run every stage again there, "
        f"or another --output_dir")


def test_the_rollout_batch_is_the_presets_unless_given():
    """A GPU preset plays 256 problems a batch (W4c ran 1.7x faster than in batches of 64), the CPU preset 64;
    --batch_prompts overrides either."""
    script = load_script(SCRIPT)

    def batch(*flags: str) -> int:
        return script.resolve(script.build_parser().parse_args(list(flags))).batch_prompts

    assert batch("--preset", "gpu") == batch("--preset", "gpu_room") == 256
    assert batch("--preset", "cpu") == 64
    assert batch("--preset", "gpu", "--batch_prompts", "32") == 32
