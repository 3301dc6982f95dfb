"""examples/pipeline.py end to end on the tiny model (every stage, one iteration each): the five-row table,
a rerun that skips every finished stage, the PRM trained on the SFT model's own labelled samples, row 4's
dense reward settings, and one-line errors before any model loads."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_examples import error_line, load_script
from tests.test_problem_records import assert_report_recomputes, assert_tampering_is_caught
from tests.tiers import slow
from tests.tiny_models import save_tiny_model_dir

PIPELINE = Path(__file__).resolve().parents[1] / "examples" / "pipeline.py"
STAGES = ["base", "sft", "ppo", "grpo", "grpo_prm", "mcts"]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> str:
    from lmgym.policies import build_tiny_model

    return save_tiny_model_dir(tmp_path_factory, build_tiny_model)


def tiny_argv(model: str, tmp_path: Path) -> list[str]:
    """Every stage at its smallest: one iteration of two items, two problems of two steps of 4 tokens."""
    configs = {"sft": "examples_per_iteration: 2\nmicro_batch_size: 2\nmax_length: 1024\n",
               "prm": "pairs_per_iteration: 2\nmicro_batch_size: 4\n",
               "grpo": "prompts_per_iteration: 2\nsamples_per_prompt: 2\nmicro_batch_size: 4\n",
               "ppo": "prompts_per_iteration: 4\nmicro_batch_size: 4\nminibatch_size: 4\nupdate_epochs: 1\n"}
    argv = ["--preset", "cpu", "--model", model, "--output_dir", str(tmp_path / "pipe"), "--level", "1",
            "--max_steps", "2", "--episodes", "2", "--max_new_tokens", "4", "--simulations", "2",
            "--sft_examples", "4", "--prm_problems", "4", "--no-progress"]
    for stage, text in configs.items():
        (tmp_path / f"{stage}.yaml").write_text(text)
        argv += [f"--{stage}_config", str(tmp_path / f"{stage}.yaml"), f"--{stage}_iterations", "1"]
    return argv


@slow
def test_pipeline_writes_the_six_rows_and_a_rerun_skips_finished_stages(tiny_model_dir, tmp_path, capsys):
    script, out = load_script(PIPELINE), tmp_path / "pipe"
    argv = [*tiny_argv(tiny_model_dir, tmp_path), "--grpo_iterations", "2"]  # row 4 refreshes its PRM once
    script.main(argv)
    first = capsys.readouterr().out
    data = json.loads((out / "pipeline.json").read_text())
    rows = data["rows"]
    assert [r["stage"] for r in rows] == STAGES
    assert [r["method"] for r in rows] == ["greedy"] * 5 + ["mcts_2"]
    for row in rows:
        result = row["results"]["arithmetic_L1"]
        assert 0.0 <= result["accuracy"] <= 1.0 and result["tokens_per_problem"] > 0 and result["problems"] == 2
    table = (out / "pipeline.md").read_text()
    lines = [ln for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith("| #")]
    assert len(lines) == 6 and "| 6 | + MCTS at inference | mcts_2 |" in table and lines[0] in first
    assert "arithmetic_L1 accuracy | arithmetic_L1 tokens/problem | arithmetic_L1 vs + GRPO, points [95% CI]" in table
    assert "| 3 | + PPO (ORM) | greedy |" in table
    # PPO, PRM-dense and MCTS each against the GRPO row on the same 2 problems
    versus = data["versus_grpo"]
    assert set(versus) == {"ppo", "grpo_prm", "mcts"}
    for stage, row in zip(STAGES, rows):
        if stage in versus:
            vs = versus[stage]["arithmetic_L1"]
            own, grpo = row["results"]["arithmetic_L1"]["accuracy"], rows[3]["results"]["arithmetic_L1"]["accuracy"]
            assert vs["difference"] == pytest.approx(own - grpo) and vs["low"] <= vs["difference"] <= vs["high"]
    ppo = json.loads((out / "ppo" / "config.json").read_text())
    assert ppo["model"] == str(out / "sft" / "model") and ppo["samples_per_prompt"] == 1
    # each row's problems recorded in <stage>/eval.problems.jsonl; benchmarks/report.py recomputes the row
    text = assert_report_recomputes(out, 6)
    assert "| mcts/eval.problems.jsonl | arithmetic_L1/mcts_2 | accuracy |" in text
    assert "| base/eval.problems.jsonl | arithmetic_L1/greedy | tokens_per_problem |" in text
    tokens = rows[5]["results"]["arithmetic_L1"]["tokens_per_problem"]

    def fewer_tokens(data):
        data["row"]["results"]["arithmetic_L1"]["tokens_per_problem"] = tokens - 1

    assert_tampering_is_caught(out / "mcts" / "eval.json", fewer_tokens,
                               f"| tokens_per_problem | {tokens:.4f} | {tokens - 1:.4f} | NO |", tmp_path / "tampered")
    for folder in ("sft/model", "prm/prm", "ppo/model", "grpo/model", "grpo_prm/model"):
        assert (out / folder / "config.json").is_file(), folder
    grpo_prm = json.loads((out / "grpo_prm" / "config.json").read_text())
    assert grpo_prm["prm_weight"] == 0.3 and grpo_prm["model"] == str(out / "grpo" / "model")
    # row 4: step credit from PRM score differences, the PRM refreshed on the policy's samples (cpu preset)
    assert grpo_prm["prm_credit"] == "progress"
    assert grpo_prm["refresh"] == {"every": 2, "steps": 1, "labels": "outcome_steps", "samples_per_step": 8,
                                   "learning_rate": 1e-5, "micro_batch_size": 8}
    grpo = json.loads((out / "grpo" / "config.json").read_text())
    assert grpo["model"] == str(out / "sft" / "model")
    assert grpo["prm_weight"] == 0.0 and grpo["prm_credit"] == "score" and grpo["refresh"]["every"] == 0
    metrics = [json.loads(line) for line in (out / "grpo_prm" / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in metrics if "verifier_loss" in m] == [2]  # metrics rows count from 1
    assert_policy_labelled_prm(out, first)
    saved = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and p.name != "pipeline.md"
             and p.name != "pipeline.json"}

    script.main(argv)  # every stage is saved: nothing trains or evaluates again
    second = capsys.readouterr().out
    for stage in ("sft", "ppo", "grpo", "grpo_prm"):
        assert f"{stage}: {out / stage / 'model'} exists, skipped" in second
    assert f"prm: {out / 'prm' / 'prm'} exists, skipped" in second
    assert all(f"{stage}: evaluation saved in {out / stage / 'eval.json'}, reused" in second for stage in STAGES)
    assert {p: p.stat().st_mtime_ns for p in saved} == saved
    assert json.loads((out / "pipeline.json").read_text())["rows"] == rows

    script.main([*argv, "--stages", "base", "--episodes", "1"])  # new settings: base alone is measured again
    third = capsys.readouterr().out
    assert [r["stage"] for r in json.loads((out / "pipeline.json").read_text())["rows"]] == ["base"]
    assert "rows not evaluated under these settings: sft, ppo, grpo, grpo_prm, mcts" in third


def assert_policy_labelled_prm(out: Path, printed: str) -> None:
    """prm/labels.jsonl holds the SFT model's own samples of the first 4 Arithmetic-v0 L1 train problems
    (--prm_problems 4; the cpu preset's 2 samples and 1 rollout each), and prm/prm is a prm_soft verifier
    trained on them."""
    from lmgym.policies.prm import ProcessRewardModel
    from lmgym.traindata.step_data import load_policy_labels

    labels = load_policy_labels(out / "prm" / "labels.jsonl")
    samples = labels.samples
    assert labels.stats["problems"] == 4 and len(samples) == 4 * 2
    # the train split's first 4 problems, in its fixed shuffled order
    from lmgym.envs import make

    train = make("Arithmetic-v0", level=1, split="train").unwrapped
    assert sorted({s.problem_id for s in samples}) == sorted(train.get_problem(i).problem_id for i in range(4))
    for s in samples:
        assert s.steps and len(s.soft) == len(s.steps) == len(s.hard)
        # one rollout a step: each soft label is that rollout's verdict, 0 or 1, and equals the hard label;
        # the last step is labelled by the sample's own verdict
        assert set(s.soft) <= {0.0, 1.0} and s.soft == s.hard
        assert s.soft[-1] == float(s.correct)
    assert "prm: labels of 8 samples of 4 problems" in printed
    run = json.loads((out / "prm" / "config.json").read_text())
    # prm_soft is trained by the pointwise BCE; one problem's 2 samples are held back (round(0.1 x 4) -> 1)
    assert run["pointwise_weight"] == 1.0 and run["train_items"] == 6 and run["held_out_items"] == 2
    assert run["model"] == str(out / "sft" / "model")
    prm = ProcessRewardModel.from_pretrained(out / "prm" / "prm", device="cpu")
    assert prm.aggregation == "min"


@slow
def test_pipeline_prm_labels_are_reused_and_a_given_prm_skips_the_stage(tiny_model_dir, tmp_path, capsys):
    import shutil

    script, argv, out = load_script(PIPELINE), tiny_argv(tiny_model_dir, tmp_path), tmp_path / "pipe"
    script.main([*argv, "--stages", "sft,prm"])
    assert_policy_labelled_prm(out, capsys.readouterr().out)
    labels = out / "prm" / "labels.jsonl"
    stamp = labels.stat().st_mtime_ns
    shutil.rmtree(out / "prm" / "prm")
    for folder in (out / "prm").glob("checkpoint-*"):
        shutil.rmtree(folder)
    script.main([*argv, "--stages", "prm"])  # the verifier is gone, its labels are not: they are reused
    printed = capsys.readouterr().out
    assert f"prm: labels {labels} exist, reused (8 samples; --restart labels again)" in printed
    assert labels.stat().st_mtime_ns == stamp and (out / "prm" / "prm" / "prm_head.safetensors").is_file()

    given = tmp_path / "given"
    shutil.copytree(out / "prm" / "prm", given)
    other = tmp_path / "other"
    script.main([*argv, "--stages", "prm", "--prm", str(given), "--output_dir", str(other)])
    assert f"prm: using {given} (--prm)" in capsys.readouterr().out
    assert not (other / "prm").exists()


@slow
def test_pipeline_gsm8k_column_is_held_back_from_sft(tiny_model_dir, gsm8k_train, tmp_path):
    from lmgym.envs import make

    rows = make("GSM8K-v0", data_path=gsm8k_train, split="train").num_problems
    out = tmp_path / "pipe"
    load_script(PIPELINE).main([*tiny_argv(tiny_model_dir, tmp_path), "--stages", "base,sft", "--sft_data", "both",
                                "--gsm8k_path", gsm8k_train, "--gsm8k_episodes", "1", "--gsm8k_rows", "2"])
    data = json.loads((out / "pipeline.json").read_text())
    assert data["suites"] == ["arithmetic_L1", "gsm8k"]
    assert data["about"]["problems"]["gsm8k"] == f"{gsm8k_train} rows {rows - 1}..{rows - 1}"
    assert [r["stage"] for r in data["rows"]] == ["base", "sft"]
    assert all(r["results"]["gsm8k"]["problems"] == 1 for r in data["rows"])
    assert json.loads((out / "sft" / "config.json").read_text())["train_examples"] == 4 + 2


def test_pipeline_bad_flags_are_one_line_before_any_model(tmp_path):
    script = load_script(PIPELINE)
    out = ["--preset", "cpu", "--model", str(tmp_path / "no_model"), "--output_dir", str(tmp_path / "pipe")]
    assert error_line(script, [*out, "--stages", "sft,rlhf"]) == (
        "error: --stages: 'rlhf'; choose from base, sft, prm, ppo, grpo, grpo_prm, mcts (or all)")
    assert error_line(script, [*out, "--stages", "grpo"]) == (
        f"error: stage grpo needs {tmp_path / 'pipe' / 'sft' / 'model'}, which does not exist: add sft to --stages")
    assert error_line(script, [*out, "--stages", "mcts", "--prm", str(tmp_path)]).startswith("error: stage mcts needs")
    assert error_line(script, [*out, "--prm_weight", "0"]) == (
        "error: --prm_weight must be > 0 (row 4 adds the PRM's reward), got 0.0")
    assert error_line(script, [*out, "--sft_data", "gsm8k"]) == "error: --sft_data gsm8k needs --gsm8k_path"
    assert error_line(script, [*out, "--level", "0", "--prm_problems", "87"]) == (  # level 0: 86 train problems
        "error: --prm_problems is 87, but the train split of Arithmetic-v0 level 0 has 86 problems")
    assert "GRPOConfig.learning_rate" in error_line(script, [*out, "--grpo_config", str(_yaml(tmp_path))])


def _yaml(tmp_path: Path) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text("learning_rate: -1\n")
    return path


def test_the_gpu_presets_refresh_the_verifier_in_two_passes_a_step():
    # row 4's refresh trains 64 samples a step; at the refresh's default micro-batch of 8 that was eight
    # forward/backward passes a step, most of a dense iteration's time on an H200
    from lmgym.algorithms import GRPOConfig

    pipeline = load_script(PIPELINE)
    for preset in ("gpu", "gpu_room"):
        values = {**pipeline.PRESETS[preset]["grpo"], **pipeline.PRESETS[preset]["grpo_prm"]}
        refresh = GRPOConfig(**values).refresh
        assert (refresh.every, refresh.samples_per_step, refresh.micro_batch_size) == (2, 64, 32), preset


def test_versus_grpo_reads_stage_records_kept_gzipped(tmp_path):
    """A saved pipeline folder keeps eval.problems.jsonl gzipped: the rows are still compared with GRPO's."""
    import gzip

    from examples.pipeline_table import versus_grpo

    def record(index, correct):
        return {"kind": "pipeline", "suite": "s", "index": index, "runs": [{"correct": correct}]}

    for stage, correct in (("grpo", [True, False, False, False]), ("ppo", [True, True, True, False])):
        (tmp_path / stage).mkdir()
        text = "".join(json.dumps(record(i, c)) + "\n" for i, c in enumerate(correct))
        (tmp_path / stage / "eval.problems.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    versus = versus_grpo(tmp_path, [{"stage": "grpo"}, {"stage": "ppo"}], ["s"])
    assert versus["ppo"]["s"]["difference"] == pytest.approx(0.5) and versus["ppo"]["s"]["problems"] == 4
