"""A capped curve evaluation killed part way keeps every (method, budget) run it finished: the next call with the
same settings reads them back, runs only the rest, and writes what an uninterrupted call writes."""
import json

import pytest

from lmgym.evaluation.curve_progress import finished_runs, partial_path, run_key
from lmgym.evaluation.curves import evaluate_curves
from lmgym.search import SearchSettings
from tests.search_toys import ScriptedPolicy, ScriptedScorer
from tests.test_rerank_eval import SAMPLES, env

BUDGETS = [9, 16, 30]
METHODS = [SearchSettings(method="maj", n=4), SearchSettings(method="best_of_n", n=4)]


class Killed(Exception):
    pass


def scorer():
    return ScriptedScorer({SAMPLES[0]: 0.9, SAMPLES[1]: 0.2, SAMPLES[3]: 0.6})


def curves(path, on_run=None, seed=0, policy=None):
    return evaluate_curves(policy or ScriptedPolicy({"": SAMPLES}), env(), METHODS, BUDGETS, scorer(), episodes=2,
                           batch_problems=1, seed=seed, records_path=path, baseline="maj", on_run=on_run)


def timeless(rows):
    return [{k: v for k, v in r.items() if k not in ("seconds", "tokens_per_second")} for r in rows]


def test_a_killed_evaluation_resumes_from_its_finished_runs_and_ends_as_an_uninterrupted_one(tmp_path):
    everything = ScriptedPolicy({"": SAMPLES})
    reference = curves(tmp_path / "whole" / "curves.json", policy=everything)
    whole = (tmp_path / "whole" / "curves.problems.jsonl").read_text()
    assert not partial_path(tmp_path / "whole" / "curves.json").exists()  # removed once all is written

    path = tmp_path / "cut" / "curves.json"

    def kill_after_two(row, done, total, resumed):
        if done == 2:
            raise Killed

    with pytest.raises(Killed):
        curves(path, kill_after_two)
    progress = partial_path(path)
    assert progress.name == "curves.problems.partial.jsonl" and not path.exists()
    assert len(finished_runs(progress)) == 2
    with open(progress, "a") as handle:  # a kill inside the next line's write leaves its start
        handle.write('{"key": "cut sho')

    seen, policy = [], ScriptedPolicy({"": SAMPLES})
    rows = curves(path, lambda row, done, total, resumed: seen.append((row["method"], row["budget"], resumed)),
                  policy=policy)
    assert seen == [("maj", 9, True), ("maj", 16, True), ("maj", 30, False), ("best_of_n", 9, False),
                    ("best_of_n", 16, False), ("best_of_n", 30, False)]
    assert timeless(rows) == timeless(reference)
    assert (tmp_path / "cut" / "curves.problems.jsonl").read_text() == whole
    assert not progress.exists()
    # the two runs read back were not sampled again: each run draws one round of 4 samples (30 tokens) a problem
    assert everything.sampled == 6 * 2 * 30 and policy.sampled == 4 * 2 * 30


def test_a_run_with_other_settings_is_not_taken_from_the_file(tmp_path):
    path = tmp_path / "curves.json"

    def kill_at_once(row, done, total, resumed):
        raise Killed

    with pytest.raises(Killed):
        curves(path, kill_at_once)
    seen = []
    curves(path, lambda row, done, total, resumed: seen.append(resumed), seed=1)
    assert seen == [False] * 6
    assert run_key(METHODS[0], 2, 0, 1, 0) != run_key(METHODS[0], 2, 0, 1, 1)
    assert run_key(METHODS[0], 2, 0, 1, 0) != run_key(METHODS[0].__class__(method="maj", n=4, temperature=0.5),
                                                      2, 0, 1, 0)


def test_the_progress_file_skips_lines_that_do_not_parse(tmp_path):
    progress = tmp_path / "x.problems.partial.jsonl"
    progress.write_text(json.dumps({"key": "a", "row": {}, "records": []}) + "\n" + "not json\n"
                        + json.dumps({"no": "key"}) + "\n")
    assert list(finished_runs(progress)) == ["a"]
    assert finished_runs(tmp_path / "missing.jsonl") == {}
    assert partial_path(tmp_path / "c.problems.jsonl") == tmp_path / "c.problems.partial.jsonl"


def test_a_method_without_its_scorer_is_refused_before_any_run(tmp_path):
    policy = ScriptedPolicy({"": SAMPLES})
    with pytest.raises(ValueError, match="evaluate_curves: method best_of_n@9tok needs a step scorer"):
        evaluate_curves(policy, env(), METHODS, BUDGETS, None, episodes=2, records_path=tmp_path / "c.json")
    assert policy.calls == [] and not partial_path(tmp_path / "c.json").exists()
