"""evaluate_search rows on a scripted policy and scorer, the markdown table and its files, and
examples/search_eval.py on the tiny model."""
import json
from pathlib import Path

import pytest

from lmgym.envs import make
from lmgym.evaluation.search_eval import evaluate_search, markdown_table, save_table
from lmgym.search import SearchSettings
from tests.search_toys import ScriptedPolicy, ScriptedScorer
from tests.test_examples import error_line, load_script
from tests.test_problem_records import assert_report_recomputes
from tests.tiers import slow
from tests.tiny_models import save_tiny_model_dir

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "search_eval.py"


def test_rows_compare_methods_on_the_same_problems_with_their_tokens():
    env = make("Arithmetic-v0", level=1, split="test", mode="stepwise", max_steps=2)
    gold = env.get_problem(0).gold
    assert all(env.get_problem(i).gold != gold for i in (1, 2))
    policy = ScriptedPolicy({"": [f"#### {gold}\n", "#### -1\n", "#### -1\n"]})
    scorer = ScriptedScorer({f"#### {gold}\n": 0.9, "#### -1\n": 0.1})
    methods = [SearchSettings(method="greedy"), SearchSettings(method="maj", n=3),
               SearchSettings(method="best_of_n", n=3)]
    rows = evaluate_search(policy, env, methods, scorer, episodes=3, batch_problems=2)
    assert [r["method"] for r in rows] == ["greedy", "maj@3", "best_of_3"]
    assert [r["accuracy"] for r in rows] == pytest.approx([1 / 3, 0.0, 1 / 3])  # the vote goes to -1
    step = len(f"#### {gold}\n")
    assert [r["tokens_per_problem"] for r in rows] == pytest.approx([step, step + 2 * 8, step + 2 * 8])
    assert all(r["problems"] == 3 and r["seconds"] > 0 and r["tokens_per_second"] > 0 for r in rows)
    assert policy.calls == [2, 1, 6, 3, 6, 3]  # 2 problems searched together, then the third
    skipped = evaluate_search(ScriptedPolicy({}), env, [SearchSettings()], episodes=2, offset=5)
    assert skipped[0]["problems"] == 2


def test_bad_requests_fail_before_any_sampling():
    env, policy = make("Arithmetic-v0", level=1, split="test", mode="stepwise"), ScriptedPolicy({})
    with pytest.raises(ValueError, match=r"^evaluate_search: method beam_4x2 needs a step scorer"):
        evaluate_search(policy, env, [SearchSettings(), SearchSettings(method="beam")])
    total = env.num_problems
    past = rf"^evaluate_search: offset {total} is past the last problem \(the env has {total}\)$"
    with pytest.raises(ValueError, match=past):
        evaluate_search(policy, env, [SearchSettings()], episodes=2, offset=total)
    with pytest.raises(ValueError, match=r"^evaluate_search: episodes must be an integer >= 1, got 0$"):
        evaluate_search(policy, env, [SearchSettings()], episodes=0)
    assert policy.calls == []


def test_markdown_table_and_its_files(tmp_path):
    rows = [{"method": "maj@8", "accuracy": 0.125, "tokens_per_problem": 301.25, "problems": 256,
             "seconds": 12.34, "tokens_per_second": 6249.9}]
    table = markdown_table(rows)
    assert table == ("| method | accuracy | tokens/problem | problems | seconds | tokens/s |\n"
                     "|---|---|---|---|---|---|\n"
                     "| maj@8 | 12.5% | 301.2 | 256 | 12.3 | 6250 |\n")
    markdown, data = save_table(rows, tmp_path / "out" / "level3", {"level": 3})
    assert markdown.read_text() == table
    assert json.loads(data.read_text()) == {"about": {"level": 3}, "rows": rows}


@pytest.fixture(scope="module")
def model_and_prm(tmp_path_factory) -> tuple[str, str]:
    """A tiny policy folder and a PRM folder on its backbone (aggregation "last")."""
    from lmgym.policies import HFPolicy, ProcessRewardModel, build_tiny_model

    model = save_tiny_model_dir(tmp_path_factory, build_tiny_model)
    prm = tmp_path_factory.mktemp("prm")
    ProcessRewardModel.from_policy(HFPolicy(model, device="cpu"), aggregation="last").save(prm)
    return model, str(prm)


@slow
def test_the_script_runs_on_the_tiny_model_and_writes_its_table(model_and_prm, tmp_path, capsys):
    model, _ = model_and_prm
    script = load_script(SCRIPT)
    script.main(["--model", model, "--level", "1", "--episodes", "2", "--n", "2", "--max_new_tokens", "4",
                 "--max_steps", "2", "--output", str(tmp_path / "table")])
    out = capsys.readouterr().out
    assert "| greedy |" in out and "| maj@2 |" in out
    saved = json.loads((tmp_path / "table.json").read_text())
    assert [r["method"] for r in saved["rows"]] == ["greedy", "maj@2"] and saved["about"]["level"] == 1
    assert (tmp_path / "table.md").read_text() in out
    # each problem's answers under both methods in table.problems.jsonl, from which report.py recomputes the table
    assert f"per-problem records: {tmp_path / 'table.problems.jsonl'}" in out
    assert "| table.problems.jsonl | maj@2 | accuracy |" in assert_report_recomputes(tmp_path, 1)


def test_the_script_runs_every_method_with_a_prm_folder(model_and_prm, tmp_path):
    model, prm = model_and_prm
    load_script(SCRIPT).main(["--model", model, "--prm", prm, "--level", "1", "--episodes", "2", "--n", "2",
                              "--beam_width", "2", "--simulations", "4", "--expand_k", "2", "--wave_size", "2",
                              "--max_new_tokens", "3", "--max_steps", "2", "--output", str(tmp_path / "table")])
    saved = json.loads((tmp_path / "table.json").read_text())
    assert [r["method"] for r in saved["rows"]] == ["greedy", "maj@2", "weighted_maj@2", "best_of_2", "beam_2x2",
                                                    "mcts_4"]
    assert saved["about"]["aggregation"] == "last"  # the PRM's own
    assert all(r["problems"] == 2 and r["tokens_per_problem"] > 0 for r in saved["rows"])


@slow
def test_the_script_draws_curves_at_its_budgets_with_a_verifier_folder(model_and_prm, tmp_path):
    model, prm = model_and_prm
    load_script(SCRIPT).main(["--preset", "cpu", "--model", model, "--prm", prm, "--episodes", "2",
                              "--budgets", "6,12,24,48", "--max_new_tokens", "3", "--max_steps", "2",
                              "--methods", "maj,weighted_maj,best_of_n", "--output", str(tmp_path / "curves")])
    saved = json.loads((tmp_path / "curves.json").read_text())
    assert [(r["method"], r["budget"]) for r in saved["rows"]] == [
        (m, b) for m in ("maj", "weighted_maj", "best_of_n") for b in (6, 12, 24, 48)]
    assert all(r["tokens_per_problem"] == r["budget"] for r in saved["rows"])  # anytime methods spend the cap
    assert saved["about"]["level"] == 1 and saved["about"]["batch_problems"] == 8  # the cpu preset's
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "| curves.problems.jsonl | best_of_n/48 | tokens_per_problem | 48.0000 | 48.0000 | yes |" in \
        assert_report_recomputes(tmp_path, 1)


def test_the_script_says_in_one_line_what_is_wrong():
    script = load_script(SCRIPT)
    assert "needs a PRM folder: --prm PATH" in error_line(script, ["--methods", "greedy,beam"])
    assert "'dfs'; choose from greedy" in error_line(script, ["--methods", "dfs"])
    assert "SearchSettings.temperature must be > 0 for maj" in error_line(script, ["--temperature", "0"])
    assert "MCTSConfig.selection must be one of" in error_line(script, ["--selection", "best"])
    assert "--budgets must be comma-separated integers" in error_line(script, ["--budgets", "10,x"])
    assert "--methods greedy has no token budget" in error_line(script, ["--budgets", "10", "--methods", "greedy"])
