"""examples/rag_grpo.py's own parts (its end-to-end run needs the RAG env and the document store: see
the integration tests): the flags, the held-out split of the questions and the before/after report."""
from __future__ import annotations

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
    assert "combined over each batch (default env)" in text  # the env's sum with REWARD_WEIGHTS
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


def hotpotqa_file(folder: Path) -> str:
    """The toy records (tests/rag_toys.py) as a HotpotQA file in the official JSON layout."""
    import json

    from tests.rag_toys import RECORDS

    rows = [{"_id": r.id, "question": r.question, "answer": r.answer, "type": r.type, "level": r.level,
             "supporting_facts": [list(fact) for fact in r.supporting_facts],
             "context": [[title, list(sentences)] for title, sentences in r.context]} for r in RECORDS]
    path = folder / "hotpot_toy.json"
    path.write_text(json.dumps(rows))
    return str(path)


def test_a_search_method_the_index_cannot_run_is_refused_before_the_model_loads(tmp_path):
    from lmgym.envs.hotpotqa.data import load_hotpotqa
    from lmgym.retrieval import DocumentStore, StoreConfig, documents_from_hotpotqa
    from tests.test_examples import error_line

    data = hotpotqa_file(tmp_path)
    common = ["--preset", "cpu", "--data_path", data, "--holdout", "1", "--model", str(tmp_path / "no-model"),
              "--output_dir", str(tmp_path / "run")]  # the model does not exist: loading it would be another error
    script = load_script()
    assert error_line(script, common + ["--no_dense", "--search_method", "dense"]) == (
        "error: --search_method dense needs dense embeddings, but --no_dense makes a BM25-only index (it can "
        "search with bm25 only); drop --no_dense or use --search_method bm25")
    assert not (tmp_path / "run").exists()  # nothing read, built or written
    index = tmp_path / "bm25-index"
    documents = documents_from_hotpotqa(load_hotpotqa(data))
    DocumentStore.build(documents, StoreConfig(dense=False), progress=False).save(index)
    for method in ("dense", "hybrid"):
        assert error_line(script, common + ["--index", str(index), "--search_method", method]) == (
            f"error: search_kwargs {{'method': '{method}'}} do not fit the store: search method '{method}' needs "
            f"dense embeddings, and this store has none (built with dense=False): it can search with bm25 only; "
            f"use method='bm25' or rebuild the index with dense embeddings")


def test_reward_weights_pay_answering_more_than_finding_paragraphs():
    from lmgym.envs import RAGHotpotQAEnv
    from tests.rag_toys import RECORDS, LetterEmbedder, ToyStore

    script = load_script()
    weights = script.REWARD_WEIGHTS
    assert max(weights["mrr"], weights["support_recall"]) < min(weights["em"], weights["f1"])
    assert weights["format"] == 0.0 and script.PRESETS["cpu"]["reward_combination"] == "env"
    assert "answer_similarity" not in script.reward_weights(ToyStore())  # BM25 only: no such component
    store = ToyStore(embedder=LetterEmbedder())
    assert script.reward_weights(store) == weights
    env = RAGHotpotQAEnv(records=RECORDS, store=store, reward_weights=script.reward_weights(store))

    def reward(actions):
        env.reset(options={"index": 0})  # Dijon; supporting: Eiffel Tower, Gustave Eiffel
        return [env.step(action)[1] for action in actions][-1]

    found_but_wrong = reward(["<search>Gustave Eiffel born</search>", "<answer>Paris</answer>"])
    right_without_search = reward(["<answer>Dijon</answer>"])
    # mrr 1 x 0.1 + recall 1 x 0.15 + strict format 0.1 + similarity("Paris", "Dijon") = 1/5 x 0.05
    assert found_but_wrong == pytest.approx(0.36)
    assert right_without_search == pytest.approx(0.3 + 0.3 + 0.1 + 0.05) and right_without_search > found_but_wrong
    found_and_right = reward(["<search>Gustave Eiffel born</search>", "<answer>Dijon</answer>"])
    assert found_and_right == pytest.approx(1.0)  # every positive weight, nothing redundant
