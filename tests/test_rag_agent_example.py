"""examples/rag_agent.py end to end on the tiny model (the cpu preset at its smallest: every stage, two GRPO
seeds): the table's rows and columns, held-out questions kept out of the transcripts and GRPO's draws, the
reference rows' episodes doing what they say, a rerun reusing everything; and its one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmgym.envs.hotpotqa.data import HotpotQARecord
from tests.rag_toys import CORPUS
from tests.test_examples import error_line, load_script
from tests.test_problem_records import assert_report_recomputes
from tests.tiers import slow
from tests.tiny_models import save_tiny_model_dir

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "rag_agent.py"
ROWS = ["base", "sft", "grpo_seed0", "grpo_seed1", "grpo_mean", "question_search", "closed_book", "gold_context"]
COLUMNS = ["MRR", "recall@3", "recall, all searches", "EM", "F1", "EM, untagged replies read",
           "F1, untagged replies read", "searches/episode", "tokens/episode"]
QUESTIONS = [  # id, question, answer, type, supporting titles; the last two are held out
    ("dijon", "Where was the engineer whose company designed the Eiffel Tower born?", "Dijon", "bridge",
     ("Eiffel Tower", "Gustave Eiffel")),
    ("london", "Which city has both Big Ben and Tower Bridge?", "London", "comparison", ("Big Ben", "Tower Bridge")),
    ("frame", "Whose company built the iron frame of the Statue of Liberty?", "Gustave Eiffel", "bridge",
     ("Statue of Liberty", "Gustave Eiffel")),
    ("country", "In which country was Gustave Eiffel born?", "France", "bridge", ("Gustave Eiffel", "Dijon")),
    ("same-city", "Are Big Ben and the Eiffel Tower in the same city?", "no", "comparison",
     ("Big Ben", "Eiffel Tower")),
    ("bell", "What is the great bell of the London clock called?", "Big Ben", "bridge", ("Big Ben", "Tower Bridge")),
]
TRAIN, HELD_OUT = [q[0] for q in QUESTIONS[:4]], [q[0] for q in QUESTIONS[4:]]


def records() -> list[HotpotQARecord]:
    return [HotpotQARecord(qid, question, answer, kind, "hard", tuple((t, 0) for t in titles),
                           tuple((title, (text,)) for title, text in CORPUS.items()))
            for qid, question, answer, kind, titles in QUESTIONS]


def hotpotqa_file(folder: Path) -> str:
    """The questions as a HotpotQA file in the hub's JSONL layout."""
    path = folder / "hotpot.jsonl"
    path.write_text("".join(json.dumps({
        "id": r.id, "question": r.question, "answer": r.answer, "type": r.type, "level": r.level,
        "supporting_facts": {"title": [t for t, _ in r.supporting_facts],
                             "sent_id": [s for _, s in r.supporting_facts]},
        "context": {"title": [t for t, _ in r.context], "sentences": [list(s) for _, s in r.context]}}) + "\n"
        for r in records()))
    return str(path)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> str:
    from lmgym.policies import build_tiny_model

    return save_tiny_model_dir(tmp_path_factory, build_tiny_model)


def tiny_argv(model: str, tmp_path: Path) -> list[str]:
    """The cpu preset at its smallest: 4 questions trained on, 2 held out, one SFT epoch (2 iterations of
    2 transcripts), one GRPO iteration per seed, 8-token turns; no system prompt (the tiny model's
    context is 1,024 characters)."""
    (tmp_path / "sft.yaml").write_text("examples_per_iteration: 2\nmicro_batch_size: 2\nmax_length: 1024\n")
    (tmp_path / "grpo.yaml").write_text("prompts_per_iteration: 2\nsamples_per_prompt: 2\nmicro_batch_size: 4\n")
    return ["--preset", "cpu", "--model", model, "--data_path", hotpotqa_file(tmp_path), "--output_dir",
            str(tmp_path / "run"), "--hold_out", "2", "--train_questions", "0", "--seeds", "2", "--k", "2",
            "--max_searches", "2", "--max_new_tokens", "8", "--system_prompt_path", "none", "--no-progress",
            "--sft_config", str(tmp_path / "sft.yaml"), "--grpo_config", str(tmp_path / "grpo.yaml"),
            "--grpo_iterations", "1"]


@pytest.mark.plots("reward_components.png")  # reads that PNG of the GRPO runs; the others are drawn only
@slow
def test_every_stage_runs_and_the_table_has_every_row_and_column(tiny_model_dir, tmp_path, capsys, monkeypatch):
    import lmgym.algorithms.base
    import lmgym.evaluation.rag_evaluate

    drawn, evaluated = [], []  # GRPO's training episodes; each evaluation's env and prompts
    train_rollout, eval_rollout = lmgym.algorithms.base.rollout, lmgym.evaluation.rag_evaluate.rollout

    def training_draws(env, policy, *args, **kwargs):
        trajectories = train_rollout(env, policy, *args, **kwargs)
        drawn.extend(t.outcome.problem_id for t in trajectories)
        return trajectories

    def evaluation(env, policy, *args, **kwargs):
        trajectories = eval_rollout(env, policy, *args, **kwargs)
        evaluated.append((env, [policy.tokenizer.decode(t.prompt_ids) for t in trajectories], trajectories))
        return trajectories

    monkeypatch.setattr(lmgym.algorithms.base, "rollout", training_draws)
    monkeypatch.setattr(lmgym.evaluation.rag_evaluate, "rollout", evaluation)
    script, argv, out = load_script(SCRIPT), tiny_argv(tiny_model_dir, tmp_path), tmp_path / "run"
    script.main(argv)
    printed = capsys.readouterr().out

    data = json.loads((out / "rag_agent.json").read_text())
    rows = {row["row"]: row for row in data["rows"]}
    assert list(rows) == ROWS
    text = assert_report_recomputes(out, len(ROWS) - 1)  # each evaluated row's eval.problems.jsonl gives its means
    assert "| sft/eval.problems.jsonl | rag | f1 |" in text
    assert all(row["questions"] == 2 and set(row["metrics"]) == {"mrr", "recall@3", "recall", "em", "f1",
                                                                 "em_reply", "f1_reply", "searches", "tokens"}
               for row in rows.values())
    for name in ROWS[:6]:  # the agents and the scripted search retrieve: MRR and recall are numbers
        assert all(rows[name]["metrics"][key] is not None for key in ("mrr", "recall@3", "recall")), name
    for name in ("closed_book", "gold_context"):  # no search: no retrieval numbers
        assert [rows[name]["metrics"][key] for key in ("mrr", "recall@3", "recall", "searches")] == [None] * 3 + [0.0]
    assert rows["question_search"]["metrics"]["searches"] == 1.0
    seeds = [rows[f"grpo_seed{s}"]["metrics"] for s in (0, 1)]
    assert rows["grpo_mean"]["metrics"]["tokens"] == pytest.approx((seeds[0]["tokens"] + seeds[1]["tokens"]) / 2)
    assert rows["grpo_mean"]["title"] == "SFT + GRPO, mean of 2 seeds"
    assert data["about"]["held_out"] == HELD_OUT and data["about"]["train_questions"] == TRAIN

    table = (out / "rag_agent.md").read_text()
    lines = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| row ")]
    assert len(lines) == len(ROWS) and all(line in printed for line in lines)
    assert "| row | " + " | ".join(COLUMNS) + " |" in table
    assert "| reference: closed book | - | - | - | " in table

    # held out: never in a transcript, never drawn by GRPO; every training question transcribed
    transcripts = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
    assert [t["id"] for t in transcripts] == TRAIN
    assert (out / "transcripts.held_out_ids.txt").read_text().split() == HELD_OUT
    assert drawn and set(drawn) <= set(TRAIN)
    assert all(t["messages"][1] == {"role": "assistant", "content": f"<search>{q[1]}</search>"}
               for t, q in zip(transcripts, QUESTIONS))

    # the models and each GRPO run's curves
    for folder in ("sft/model", "grpo_seed0/model", "grpo_seed1/model"):
        assert (out / folder / "config.json").is_file(), folder
    for seed in (0, 1):
        run = out / f"grpo_seed{seed}"
        assert (run / "reward_components.png").is_file() and (run / "metrics.jsonl").is_file()
        config = json.loads((run / "config.json").read_text())
        assert config["seed"] == seed and config["model"] == str(out / "sft" / "model")
        assert config["reward_combination"] == "env"

    # every evaluation ran on the held-out questions; the references did what their rows say
    assert len(evaluated) == len(ROWS) - 1
    by_kind = {}
    for env, prompts, trajectories in evaluated:
        assert [t.outcome.problem_id for t in trajectories] == HELD_OUT
        by_kind.setdefault(type(env).__name__ + getattr(env, "context", ""), []).append((prompts, trajectories))
    question_search = (out / "question_search" / "eval.problems.jsonl").read_text().splitlines()
    for episode, (qid, question, *_) in zip(map(json.loads, question_search), QUESTIONS[4:]):
        assert episode["id"] == qid and episode["queries"] == [question] and len(episode["retrieved_titles"]) == 2
    [(prompts, _)] = by_kind["QuestionSearchHotpotQAEnvclosed_book"]
    assert all(f"Question: {q[1]}" in p for p, q in zip(prompts, QUESTIONS[4:]))
    assert sum(text in prompts[0] for text in CORPUS.values()) == 2  # the top 2 passages, not the whole context
    [(prompts, trajectories)] = by_kind["HotpotQAEnvclosed_book"]
    assert all(t.info["steps"] and "tool_calls" not in t.info for t in trajectories)
    assert not any(text in p for p in prompts for text in CORPUS.values())  # the question alone
    [(prompts, _)] = by_kind["HotpotQAEnvdistractor"]
    assert all(all(text in p for text in CORPUS.values()) for p in prompts)  # the record's own paragraphs
    for name in ("closed_book", "gold_context"):
        episodes = [json.loads(line) for line in (out / name / "eval.problems.jsonl").read_text().splitlines()]
        assert all(e["queries"] == [] and e["retrieved_titles"] is None for e in episodes)

    script.main(argv)  # everything is saved: nothing trains or evaluates again
    second = capsys.readouterr().out
    for stage in ("sft", "grpo_seed0", "grpo_seed1"):
        assert f"{stage}: {out / stage / 'model'} exists, skipped" in second
    assert all(f"{row}: evaluation saved in {out / row / 'eval.json'}, reused" in second
               for row in ROWS if row != "grpo_mean")
    assert json.loads((out / "rag_agent.json").read_text())["rows"] == data["rows"]


def test_bad_input_is_one_line_before_any_model_loads(tmp_path):
    script, data = load_script(SCRIPT), hotpotqa_file(tmp_path)
    common = ["--preset", "cpu", "--data_path", data, "--model", str(tmp_path / "no-model"),
              "--output_dir", str(tmp_path / "run")]
    assert error_line(script, common + ["--hold_out", "6"]) == (
        "error: holding out 6 of 6 question(s) leaves none to train on; hold out fewer")
    assert error_line(script, common + ["--hold_out", "0"]) == (
        "error: --hold_out must be >= 1 (the rows are evaluated on the held-out questions), got 0")
    assert error_line(script, common + ["--stages", "sft,dpo"]) == (
        "error: --stages: 'dpo'; choose from sft, grpo, base, question_search, closed_book, gold_context (or all)")
    assert error_line(script, common + ["--seeds", "0"]) == "error: --seeds must be >= 1, got 0"
    assert error_line(script, common + ["--no_dense", "--search_method", "hybrid"]).startswith(
        "error: --search_method hybrid needs dense embeddings")
    assert error_line(script, common + ["--stages", "grpo"]) == (
        f"error: stage grpo needs {tmp_path / 'run' / 'sft' / 'model'}, which does not exist: add sft to --stages")
    assert not (tmp_path / "run").exists()  # nothing built or written
