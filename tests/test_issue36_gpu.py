"""benchmarks/issue36_gpu.py and benchmarks/verifier_scaling.py on the CPU: every stage's command parses with its
script's own parser (the dry run), a bad one is named, --next runs unfinished stages while their estimates fit and
skips finished ones, every stage fits a device call; the scaling curve's training samples (both policies, the first
n problems, balanced) on synthetic labels."""
import importlib.util
import sys
from pathlib import Path

import pytest

from lmgym.traindata.step_data import LabelledSample, PolicyLabels, label_balance, save_policy_labels
from tests.tiers import slow

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_dry_run_parses_every_command_and_every_stage_fits_a_device_call(tmp_path, capsys):
    runner = load("issue36_gpu")
    stages = runner.stages(tmp_path, [2, 3, 4])
    count = runner.dry_run(stages)
    assert count == sum(len(s.commands) for s in stages) and count > 30
    # the chain runs in the background while device calls wait on it, so a stage may outlast one call; the estimates
    # are what the 31st session's lease measured beside a full card (MCTS's curve 16.6 minutes; the critic's capped
    # curves cut unfinished at 18), each under a lease's 30 minutes
    assert all(0 < s.minutes <= 25 for s in stages)
    assert len({s.name for s in stages}) == len(stages) and len({s.output for s in stages}) == len(stages)
    names = [s.name for s in stages]
    # a stage comes after every stage it needs (so one at a time in order works), and names only real ones;
    # the chain: the second policy's labels after its SFT, training after labels, curves after evaluation
    for stage in stages:
        assert all(names.index(d) < names.index(stage.name) for d in stage.after), stage.name
    by_name = {s.name: s for s in stages}
    for before, after in (("sft", "second_L2"), ("label_stats", "train"), ("evaluate", "curves_maj"),
                          ("label_stats", "scaling_n250"), ("train", "dense_seed0"), ("pipe_grpo", "pipe_grpo_prm"),
                          ("critic", "curves_critic")):
        assert needs(by_name, after, before), (before, after)
    # the pipeline's PPO and GRPO rows both start from its SFT, so neither waits on the other (two slots run them
    # side by side); MCTS searches with GRPO + PRM's model
    assert not needs(by_name, "pipe_ppo", "pipe_grpo") and not needs(by_name, "pipe_grpo", "pipe_ppo")
    assert needs(by_name, "pipe_ppo", "pipe_sft") and needs(by_name, "pipe_mcts", "pipe_grpo_prm")
    assert not needs(by_name, "pipe_mcts", "pipe_ppo")
    assert "dry run: " in capsys.readouterr().out
    runner.main([str(tmp_path), "--dry_run", "--levels", "2"])  # the CLI's own dry run


def test_the_training_comparisons_run_on_the_last_labelled_level(tmp_path):
    # the PRM is trained on the labelled levels' labels and the budgeted SFT on their gold solutions: the dense and
    # MCTSSearch comparisons must train and evaluate there, not on a level neither has seen
    runner = load("issue36_gpu")
    for levels, level in (([2], "2"), ([2, 3], "3")):
        by_name = {s.name: s for s in runner.stages(tmp_path, levels)}
        for name in ("dense_seed0", "mcts_seed4"):
            for _, argv in by_name[name].commands:
                assert argv[argv.index("--level") + 1] == level, (levels, name)


def test_the_training_comparisons_start_from_the_sft_at_its_learning_rate_and_measure_896_problems(tmp_path):
    # at the scripts' 5e-5 (tuned from the base model) every method lost accuracy from the SFT on an H200; every run
    # of both comparisons gets the rate after SFT and 896 held-out problems (the rehearsal keeps its tiny sizes)
    runner = load("issue36_gpu")
    by_name = {s.name: s for s in runner.stages(tmp_path, [2])}
    for name in ("dense_seed0", "mcts_seed4"):
        assert len(by_name[name].commands) == 2
        for _, argv in by_name[name].commands:
            assert argv[argv.index("--learning-rate") + 1] == "2e-06" == str(runner.RL_AFTER_SFT_LR), name
            assert argv[argv.index("--eval-episodes") + 1] == "896", name
    rehearsed = {s.name: s for s in runner.stages(tmp_path, [2], rehearse="tiny")}
    argv = rehearsed["dense_seed0"].commands[0][1]
    last = max(k for k, word in enumerate(argv) if word == "--eval-episodes")  # argparse keeps the last one
    assert argv[last + 1] == "2"


def test_majs_curve_reaches_past_the_tokens_the_critics_rows_generate(tmp_path):
    # the critic's rows generate about 790 tokens a problem (policy and checks); the equal-tokens comparison takes
    # maj at the smallest budget reaching that, so maj's curve goes on to 1,024, and only maj's
    runner = load("issue36_gpu")
    by_name = {s.name: s for s in runner.stages(tmp_path, [2])}

    def budgets(name):
        argv = by_name[name].commands[0][1]
        last = max(k for k, word in enumerate(argv) if word == "--budgets")  # argparse keeps the last one
        return [int(b) for b in argv[last + 1].split(",")]

    assert max(budgets("curves_maj")) >= 1024
    assert max(budgets("curves_weighted")) == max(budgets("curves_critic")) == 768
    assert max(budgets("curves_mcts")) == 384
    assert max(budgets("curves_pool")) == max(budgets("curves_pool_sft")) >= 1024  # maj's largest budget


def test_a_command_its_script_rejects_is_named(tmp_path):
    runner = load("issue36_gpu")
    bad = runner.Stage("bad", 1, tmp_path / "x", (("verifier_loop", ("--no_such_flag",)),))
    with pytest.raises(SystemExit, match="stage bad: verifier_loop.py rejects --no_such_flag"):
        runner.dry_run([bad])


def test_the_report_gathers_the_saved_summaries_and_names_the_missing(tmp_path, capsys):
    runner = load("issue36_gpu")
    (tmp_path / "dense").mkdir()
    (tmp_path / "dense" / "results.md").write_text("# Dense against outcome\n\n| method | seeds |\n")
    runner.main([str(tmp_path), "--report"])
    text = (tmp_path / "issue36.md").read_text()
    assert text == capsys.readouterr().out
    assert "## Dense credit against outcome-only GRPO\n\n`dense/results.md`\n\n### Dense against outcome" in text
    assert "(not run yet: critic)" in text and text.count("(not run yet") == len(runner.REPORT) - 1
    with pytest.raises(SystemExit, match="is no folder"):
        runner.main([str(tmp_path / "nope"), "--report"])


def needs(by_name, stage, other) -> bool:
    """`stage` needs `other`, directly or through the stages it needs."""
    return other in by_name[stage].after or any(needs(by_name, d, other) for d in by_name[stage].after)


def fake_runs(runner, monkeypatch, fail=()):
    """run_stage replaced: each stage (threads may run several) is recorded, writes its output unless in `fail`."""
    ran = []

    def fake_run(stage, out, timeout):
        ran.append(stage.name)
        if stage.name in fail:
            return False
        stage.output.parent.mkdir(parents=True, exist_ok=True)
        stage.output.write_text("done\n")
        return True

    monkeypatch.setattr(runner, "run_stage", fake_run)
    return ran


def test_next_runs_unfinished_stages_while_their_estimates_fit(tmp_path, monkeypatch, capsys):
    runner = load("issue36_gpu")
    ran = fake_runs(runner, monkeypatch)
    first = runner.stages(tmp_path, [2])
    first[1].output.parent.mkdir(parents=True, exist_ok=True)
    first[1].output.write_text("saved\n")  # label_L2 saved by an earlier session: skipped
    runner.main([str(tmp_path), "--next", "--minutes", "8", "--levels", "2"])
    assert ran == ["sft", "second_L2", "critic", "label_stats"]  # 2 + 2 + 3 + 0.5; train's 4 would pass 8
    assert "next: train (4 min estimated) does not fit" in capsys.readouterr().out
    runner.main([str(tmp_path), "--list", "--levels", "2"])
    listed = capsys.readouterr().out
    assert "done  sft" in listed and "      train" in listed
    with pytest.raises(SystemExit, match="no such stage"):
        runner.main([str(tmp_path), "--stage", "nope"])
    with pytest.raises(SystemExit, match="--parallel must be >= 1"):
        runner.main([str(tmp_path), "--next", "--parallel", "0"])


def test_the_plan_runs_stages_side_by_side_after_the_ones_they_need(tmp_path):
    """Two at a time, by the estimates: the SFT and the first labels start together, the second policy's labels
    after its SFT, the critic in the slot the first labels free; the chain to the headline table (curves_maj) fits
    25 minutes, where one at a time it would not; with the pooled curves beside it (17 minutes), 28."""
    runner = load("issue36_gpu")
    stages = runner.stages(tmp_path, [2])
    one, _ = runner.plan(stages, 1, 25)
    two, left = runner.plan(stages, 2, 25)
    assert "curves_maj" not in [s.name for s in one] and "curves_maj" in [s.name for s in two]
    assert "curves_pool" not in [s.name for s in two]
    assert "curves_pool" in [s.name for s in runner.plan(stages, 2, 28)[0]]
    assert [s.name for s in two][:6] == ["sft", "label_L2", "second_L2", "critic", "label_stats", "train"]
    assert all(s.name not in [t.name for t in two] for s in left)
    # a stage that needs one left out is left out too
    assert "dense_seed0" in [s.name for s in left] and "summaries" in [s.name for s in left]


def test_only_plans_the_named_stages_from_labels_carried_in(tmp_path, monkeypatch, capsys):
    """A later lease carries the labels in (their stages done) and names what to run: the verifiers, the headline
    table, MCTS's curve and the first seed of both training comparisons; nothing else starts, and a stage that
    needs one not named (the critic, for the curves) is left out."""
    runner = load("issue36_gpu")
    ran = fake_runs(runner, monkeypatch)
    for stage in runner.stages(tmp_path, [2]):
        if stage.name in ("label_L2", "second_L2", "label_stats"):
            stage.output.parent.mkdir(parents=True, exist_ok=True)
            stage.output.write_text("carried in\n")
    chosen, left = runner.plan(runner.stages(tmp_path, [2]), 2, 30, {"sft", "train", "evaluate", "curves_maj"})
    assert [s.name for s in chosen] == ["sft", "train", "evaluate"] and [s.name for s in left] == ["curves_maj"]
    wanted = "sft,critic,train,evaluate,curves_maj,curves_mcts,dense_seed0,mcts_seed0"
    runner.main([str(tmp_path), "--next", "--minutes", "40", "--parallel", "2", "--levels", "2", "--only", wanted])
    assert sorted(ran) == sorted(wanted.split(","))
    assert ran.index("train") < ran.index("evaluate") < ran.index("curves_maj") and ran.index("critic") < \
        ran.index("curves_mcts")
    with pytest.raises(SystemExit, match="--only: no such stage curves_nope"):
        runner.main([str(tmp_path), "--next", "--levels", "2", "--only", "sft,curves_nope"])


def test_a_failed_stage_takes_the_stages_that_need_it_and_no_other(tmp_path, monkeypatch, capsys):
    runner = load("issue36_gpu")
    ran = fake_runs(runner, monkeypatch, fail={"sft"})
    runner.main([str(tmp_path), "--next", "--minutes", "14", "--levels", "2", "--parallel", "2"])
    assert "sft" in ran and "label_L2" in ran and "critic" in ran  # the labels and the critic need no SFT
    assert "second_L2" not in ran and "label_stats" not in ran
    out = capsys.readouterr().out
    assert "stopped: sft did not finish" in out and "skipped: second_L2 needs sft" in out


def samples(level, problems, right_every, offset=0):
    out = []
    for p in range(problems):
        for j in range(4):
            out.append(LabelledSample(f"q{p}", f"arithmetic/L{level}/{p}", ("a = 1",), (4 * p + j + offset) %
                                      right_every == 0, "1"))
    return out


def test_scaling_takes_both_policies_first_n_problems_balanced(tmp_path):
    scaling = load("verifier_scaling")
    run = tmp_path / "vl"
    save_policy_labels(run / "labels" / "train_L2.jsonl", PolicyLabels(samples(2, 10, 16)))
    save_policy_labels(run / "labels" / "train_L2.second.jsonl", PolicyLabels(samples(2, 10, 2)))
    save_policy_labels(run / "labels" / "test_L2.jsonl", PolicyLabels(samples(2, 3, 3)))
    assert scaling.levels_in(run, "train") == [2] and scaling.levels_in(run, "test") == [2]
    chosen, balance = scaling.training_samples(run, [2], 5, 0.5, seed=0)
    # first 5 problems: the policy's 20 samples (right at 0 and 16: 2), the second's 20 (10 right): 12 right of 40
    assert (balance["L2"]["before"]["samples"], balance["L2"]["before"]["right"]) == (40, 12)
    assert balance["L2"]["after"] == label_balance(chosen) and label_balance(chosen)["right_share"] == 0.5
    assert {s.problem_id for s in chosen} <= {f"arithmetic/L2/{p}" for p in range(5)}
    assert balance["L2"]["mode"] == "per_policy" and balance["L2"]["source_auc"]["after"] == pytest.approx(0.5)
    assert [balance["L2"]["sources"][k]["after"]["right_share"] for k in ("policy", "second")] == [0.5, 0.5]
    table = scaling.markdown([{"size": 250, "train_samples": 10, "levels": {"L2": {"solution_auc": 0.7}}},
                              {"size": 125, "train_samples": 5, "levels": {"L2": {"solution_auc": None}}},
                              {"size": 500, "train_samples": 20, "levels": {"L2": {
                                  "solution_auc": 0.6, "solution_auc_low": 0.512, "solution_auc_high": 0.688,
                                  "solution_within_problem_auc": 0.55,
                                  "solution_count": 2048.0, "solution_positive_rate": 25 / 2048}}}])
    assert table.splitlines()[2:] == ["| 125 | 5 | - |", "| 250 | 10 | 0.700 |",
                                      "| 500 | 20 | 0.600 [0.51, 0.69], within problems 0.550 (25 right) |"]


@slow
def test_the_rehearsal_runs_every_stage_two_at_a_time(tmp_path, capsys):
    """--rehearse: every stage (level 2, one seed: the labels of both policies, the critic, the verifiers, every
    curve, scaling, dense credit, MCTSSearch, the pipeline, the summaries) at the scripts' cpu presets on the tiny
    model, two at a time: every stage's output is saved, and the headline table holds the critic's rows. (It found
    the policy's labels refused without the SFT's model.)"""
    import json

    from lmgym.policies import build_tiny_model
    from tests.tiny_models import save_tiny_model_dir

    class Factory:  # save_tiny_model_dir's tmp_path_factory
        @staticmethod
        def mktemp(name):
            folder = tmp_path / name
            folder.mkdir()
            return folder

    model, out = save_tiny_model_dir(Factory, build_tiny_model), tmp_path / "run"
    runner = load("issue36_gpu")
    runner.main([str(out), "--next", "--rehearse", model, "--parallel", "2", "--minutes", "500", "--timeout", "600"])
    printed = capsys.readouterr().out
    every = runner.stages(out, [2], 1, sizes=(2,), rehearse=model)
    assert len(every) == 25 and all(s.output.exists() for s in every), printed
    assert json.loads((out / "vl" / "curves" / "L2_pool_second.json").read_text())["about"]["pool_policy"] == "second"
    pooled = json.loads((out / "vl" / "curves" / "L2_pool.json").read_text())["rows"]
    assert {r["method"] for r in pooled} >= {"maj", "weighted_maj[critic]", "best_of_n[critic]"}
    rows = json.loads((out / "vl" / "curves" / "L2_at_maj.json").read_text())["rows"]
    better = json.loads((out / "vl" / "verifier_eval.json").read_text())["better"]
    assert [r["method"] for r in rows][-4:] == ["weighted_maj[critic]@2", "best_of_2[critic]",
                                                f"weighted_maj[{better}_critic]@2", f"best_of_2[{better}_critic]"]
    mcts = json.loads((out / "vl" / "curves" / "L2_part_mcts.json").read_text())["rows"]
    assert [(r["method"], r["budget"]) for r in mcts] == [("mcts", 16), ("mcts", 32)]
    # MCTS with the critic as its value: the critic's checks counted beside the policy's tokens
    critic_mcts = json.loads((out / "vl" / "curves" / "L2_part_mcts_critic.json").read_text())["rows"]
    assert [(r["method"], r["budget"]) for r in critic_mcts] == [("mcts[critic]", 16), ("mcts[critic]", 32)]
    assert all(r["verifier_tokens_per_problem"] > 0 for r in critic_mcts)
    runner.main([str(out), "--report"])  # every section's summary is saved
    assert "(not run yet" not in (out / "issue36.md").read_text()


def test_the_mcts_stages_pass_mcts_advantages_to_every_search_training_command(tmp_path):
    runner = load("issue36_gpu")
    for scaling in ("none", "whiten"):
        by_name = {s.name: s for s in runner.stages(tmp_path, [2], mcts_advantages=scaling)}
        for name in ("mcts_seed0", "mcts_seed4", "summaries"):
            commands = [argv for key, argv in by_name[name].commands if key == "search_training"]
            assert commands and all(argv[argv.index("--mcts-advantages") + 1] == scaling for argv in commands)
    parse = runner.build_parser().parse_args
    assert parse(["out", "--list"]).mcts_advantages == "none"
    assert parse(["out", "--list", "--mcts-advantages", "whiten"]).mcts_advantages == "whiten"
