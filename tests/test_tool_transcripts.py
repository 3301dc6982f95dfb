"""Tool-use transcripts (traindata/tool_transcripts.py) played through RAGHotpotQAEnv on a word-overlap store
written here, their SFT encoding (only the assistant turns trained on), and examples/rag_transcripts.py on a
tiny HotpotQA file (a BM25-only DocumentStore)."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from lmgym.algorithms.sft_tokens import encode_example
from lmgym.envs.hotpotqa.data import HotpotQARecord, held_out_ranges
from lmgym.envs.hotpotqa.rag import RAGHotpotQAEnv
from lmgym.retrieval import Hit
from lmgym.traindata import ChatExample, hop2_queries, load_sft_examples, tool_transcript, tool_transcripts

ROOT = Path(__file__).resolve().parents[1]
RAG_SYSTEM_PROMPT = (ROOT / "lmgym" / "prompts" / "rag_sys.txt").read_text().strip()
CORPUS = {  # word overlap with a query ranks them; ties keep this order
    "Mira Vantello": "Mira Vantello was born in Ostrava.",
    "Zorblat Tower": "Zorblat Tower was designed by Mira Vantello.",
    "Kelpie River": "Kelpie River is long.",
    "Fenwick River": "Fenwick River is longer.",
}
DESIGNER_BORN = "Where was the designer of Zorblat Tower born?"  # overlap: Zorblat Tower 3, Mira Vantello 2
WHICH_LONGER = "Which is longer, the Kelpie River or the Fenwick River?"  # Fenwick River 4, Kelpie River 3
NO_OVERLAP = "Which of these two waters has more length?"  # overlaps nothing: corpus order


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


class OverlapStore:
    """Passages ranked by the number of distinct words they (title and text) share with the query."""

    def search(self, query: str, k: int, **kwargs) -> list[Hit]:
        hits = [Hit(title, title, text, float(len(words(query) & words(f"{title} {text}"))))
                for title, text in CORPUS.items()]
        return sorted(hits, key=lambda hit: -hit.score)[:k]


def record(rid: str, question: str, answer: str, kind: str, supporting: tuple[str, ...]) -> HotpotQARecord:
    return HotpotQARecord(rid, question, answer, kind, "hard", tuple((t, 0) for t in supporting),
                          tuple((t, (text,)) for t, text in CORPUS.items()))


def result(*titles: str) -> str:
    """The tool turn the env writes for these passages."""
    return "<result>" + "\n\n".join(f"[{n}] {t}\n{CORPUS[t]}" for n, t in enumerate(titles, 1)) + "</result>"


def play(rec: HotpotQARecord, k: int = 1, max_searches: int = 3, system_prompt: str | None = None):
    env = RAGHotpotQAEnv(records=[rec], store=OverlapStore(), k=k, max_searches=max_searches)
    return env, tool_transcript(env, rec, system_prompt)


def test_a_bridge_question_searches_the_question_then_the_bridge_entity():
    rec = record("b1", DESIGNER_BORN, "Ostrava", "bridge", ("Zorblat Tower", "Mira Vantello"))
    env, transcript = play(rec)
    prompt = env.reset(options={"index": 0})[0]
    assert transcript.queries == (DESIGNER_BORN, "Mira Vantello")
    assert list(transcript.example.messages) == [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": f"<search>{DESIGNER_BORN}</search>"},
        {"role": "tool", "content": result("Zorblat Tower")},
        {"role": "assistant", "content": "<search>Mira Vantello</search>"},
        {"role": "tool", "content": result("Mira Vantello")},
        {"role": "assistant", "content": "<answer>Ostrava</answer>"},
    ]
    assert transcript.retrieved_titles == ("Zorblat Tower", "Mira Vantello") and transcript.found_all
    # hop 1 found the second supporting title but not the first: hop 2 searches the one still missing
    swapped = record("b2", DESIGNER_BORN, "Ostrava", "bridge", ("Mira Vantello", "Zorblat Tower"))
    assert play(swapped)[1].queries == (DESIGNER_BORN, "Mira Vantello")


def test_hop_two_is_skipped_when_hop_one_retrieved_the_bridge_entity():
    rec = record("b3", DESIGNER_BORN, "Ostrava", "bridge", ("Zorblat Tower", "Mira Vantello"))
    _, transcript = play(rec, k=2)
    assert transcript.queries == (DESIGNER_BORN,)
    assert [m["role"] for m in transcript.example.messages] == ["user", "assistant", "tool", "assistant"]
    assert transcript.example.messages[2]["content"] == result("Zorblat Tower", "Mira Vantello")
    assert transcript.example.messages[-1]["content"] == "<answer>Ostrava</answer>"


def test_a_comparison_question_searches_each_entity_not_yet_retrieved():
    both = ("Kelpie River", "Fenwick River")
    _, one_found = play(record("c1", WHICH_LONGER, "Fenwick River", "comparison", both))
    assert one_found.queries == (WHICH_LONGER, "Kelpie River")  # hop 1 retrieved Fenwick River
    assert [m["content"] for m in one_found.example.messages if m["role"] == "tool"] == [
        result("Fenwick River"), result("Kelpie River")]

    _, none_found = play(record("c2", NO_OVERLAP, "Fenwick River", "comparison", both))
    assert none_found.queries == (NO_OVERLAP, "Kelpie River", "Fenwick River")
    assert [m["content"] for m in none_found.example.messages if m["role"] == "tool"] == [
        result("Mira Vantello"), result("Kelpie River"), result("Fenwick River")]
    assert none_found.example.messages[-1] == {"role": "assistant", "content": "<answer>Fenwick River</answer>"}

    # the first entity's search (top 2: Kelpie River 2 words, Fenwick River 1) brings the second along
    _, brought = play(record("c3", NO_OVERLAP, "Fenwick River", "comparison", both), k=2)
    assert brought.queries == (NO_OVERLAP, "Kelpie River")
    # only as many searches as the env allows
    _, capped = play(record("c4", NO_OVERLAP, "Fenwick River", "comparison", both), max_searches=2)
    assert capped.queries == (NO_OVERLAP, "Kelpie River")


def test_hop_two_rules_and_bad_input_are_one_line():
    assert hop2_queries("bridge", ("A", "B"), ["C"]) == ["B"]
    assert hop2_queries("bridge", ("A", "B"), ["B"]) == ["A"]
    assert hop2_queries("bridge", ("A", "B"), ["A", "B"]) == []
    assert hop2_queries("comparison", ("A", "B"), ["B"]) == ["A"]
    with pytest.raises(ValueError, match="^question type must be one of bridge, comparison; got 'multi'$"):
        hop2_queries("multi", ("A", "B"), [])
    rec = record("b1", DESIGNER_BORN, "Ostrava", "bridge", ("Zorblat Tower", "Mira Vantello"))
    other = record("x", DESIGNER_BORN, "Ostrava", "bridge", ("Zorblat Tower",))
    env = RAGHotpotQAEnv(records=[rec], store=OverlapStore(), k=1)
    with pytest.raises(ValueError, match="^question 'x' is not one of the env's"):
        tool_transcript(env, other)
    raw = RAGHotpotQAEnv(records=[rec], store=OverlapStore(), k=1, result_role=None)
    with pytest.raises(ValueError, match="result_role None"):
        tool_transcript(raw, rec)
    short = RAGHotpotQAEnv(records=[rec], store=OverlapStore(), k=1, max_steps=1)
    with pytest.raises(ValueError, match="^question 'b1': the episode ended before the answer"):
        tool_transcript(short, rec)
    assert held_out_ranges(10, 3) == ((0, 7), (7, 10)) and held_out_ranges(4, 0) == ((0, 4), (4, 4))
    with pytest.raises(ValueError, match="^holding out 5 of 5 question"):
        held_out_ranges(5, 5)


@pytest.mark.parametrize("system_prompt", [None, "Search, then answer."])
def test_sft_trains_on_the_assistant_turns_only(tiny_policy, system_prompt):
    rec = record("c2", NO_OVERLAP, "Fenwick River", "comparison", ("Kelpie River", "Fenwick River"))
    _, transcript = play(rec, system_prompt=system_prompt)
    tiny_policy.system_prompt = "The policy's own."  # first only when the transcript has no system turn
    turns = [m for m in transcript.example.messages if m["role"] != "system"]
    assert [m["content"] for m in transcript.example.messages if m["role"] == "system"] == (
        [system_prompt] if system_prompt else [])
    encoded = encode_example(tiny_policy, transcript.example)
    decode = tiny_policy.tokenizer.decode
    actions = [m["content"] for m in transcript.example.messages if m["role"] == "assistant"]
    assert len(actions) == 4
    assert decode([t for t, w in zip(encoded.ids, encoded.weights) if w]) == "".join(
        f"{action}<|im_end|>" for action in actions)
    masked = decode([t for t, w in zip(encoded.ids, encoded.weights) if not w])
    for message in transcript.example.messages:
        if message["role"] != "assistant":  # the prompts and every tool turn, whole, with no weight
            assert f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>" in masked
    assert masked.startswith(f"<|im_start|>system\n{system_prompt or tiny_policy.system_prompt}<|im_end|>")
    # the tokens are those of the GRPO engine's episode (its policy prompted with the same system prompt):
    # the prompt, each action, each tool turn as a turn of its role
    tiny_policy.system_prompt = system_prompt or tiny_policy.system_prompt
    ids = list(tiny_policy.format_prompt(turns[0]["content"]))
    for message in turns[1:]:
        if message["role"] == "assistant":
            ids += tiny_policy.encode_text(message["content"])
        else:
            ids += tiny_policy.encode_turn(message["content"], message["role"], after=ids)
    assert encoded.ids[:len(ids)] == ids


def test_transcripts_round_trip_through_jsonl(tmp_path):
    rec = record("b1", DESIGNER_BORN, "Ostrava", "bridge", ("Zorblat Tower", "Mira Vantello"))
    env = RAGHotpotQAEnv(records=[rec], store=OverlapStore(), k=1)
    (transcript,) = tool_transcripts(env)
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(transcript.to_row()) + "\n")
    (example,) = load_sft_examples(path)
    assert isinstance(example, ChatExample) and example.messages == transcript.example.messages


# ---------------------------------------------------------------- the script
def hub_row(rid: str, question: str, answer: str, kind: str, gold: list[tuple[str, str]]) -> dict:
    paragraphs = gold + [("Honey bee", "Bees make honey."), ("Piano", "A piano has hammers.")]
    return {"id": rid, "question": question, "answer": answer, "type": kind, "level": "hard",
            "supporting_facts": {"title": [t for t, _ in gold], "sent_id": [0] * len(gold)},
            "context": {"title": [t for t, _ in paragraphs], "sentences": [[s] for _, s in paragraphs]}}


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("rag_transcripts", ROOT / "examples" / "rag_transcripts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_writes_transcripts_of_all_but_the_held_out_questions(script, tmp_path, capsys):
    rows = [hub_row(f"q{n}", f"Which river flows through city {n}?", "Danube", "bridge",
                    [(f"City {n}", f"City {n} lies on the Danube."), ("Danube", "The Danube is a river.")])
            for n in range(4)]
    rows.append(hub_row("q4", "Which is older, Chess or Go?", "Go", "comparison",
                        [("Chess", "Chess is a board game."), ("Go (game)", "Go is an old board game.")]))
    data = tmp_path / "hotpot.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out" / "transcripts.jsonl"
    script.main(["--data_path", str(data), "--out", str(out), "--hold-out", "2", "--k", "2"])
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["id"] for row in lines] == ["q0", "q1", "q2"]
    assert (tmp_path / "out" / "transcripts.held_out_ids.txt").read_text() == "q3\nq4\n"
    assert all(row["queries"][0] == rows[i]["question"] for i, row in enumerate(lines))
    assert all(row["messages"][-1] == {"role": "assistant", "content": "<answer>Danube</answer>"} for row in lines)
    assert all(row["messages"][0] == {"role": "system", "content": RAG_SYSTEM_PROMPT} for row in lines)
    assert len(load_sft_examples(out)) == 3
    assert "wrote 3 transcripts" in capsys.readouterr().out
    script.main(["--data_path", str(data), "--out", str(out), "--hold_out", "4", "--system_prompt_path", "none"])
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["id"] == "q0" and row["messages"][0]["role"] == "user"
    assert (tmp_path / "out" / "transcripts.held_out_ids.txt").read_text() == "q1\nq2\nq3\nq4\n"


def test_the_script_refuses_bad_input_in_one_line(script, tmp_path):
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(SystemExit, match=f"^error: HotpotQA file not found: {re.escape(str(missing))}$"):
        script.main(["--data_path", str(missing), "--out", str(tmp_path / "t.jsonl")])
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(hub_row("q0", "Where?", "x", "bridge", [("A", "a.")])) + "\n")
    with pytest.raises(SystemExit, match="^error: holding out 150 of 1 question"):
        script.main(["--data_path", str(data), "--out", str(tmp_path / "t.jsonl")])
