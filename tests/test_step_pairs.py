"""Step data for PRMs: the two item kinds, their JSONL files (bad lines named by file:line), and the
held-out split by problem."""
import json

import pytest

from lmgym.buffers import RatedSteps, StepPair, load_step_data, save_step_data, split_by_problem

Q = "Compute 3 + 4 * 2."


def items() -> list:
    return [
        StepPair(Q, ("4 * 2 = 8\n",), "3 + 8 = 11\n", "3 + 8 = 12\n", margin=0.5, source="gold_corruption",
                 problem_id="p1"),
        StepPair(Q, [], "4 * 2 = 8\n", "4 + 2 = 6\n", problem_id="p1"),
        RatedSteps("Compute 1 + 1.", ["1 + 1 = 2\n", "#### 2\n"], [1, None], source="prm800k", problem_id="p2"),
    ]


def test_items_round_trip_through_a_jsonl_file(tmp_path):
    path = tmp_path / "sub" / "data.jsonl"
    save_step_data(path, items())
    loaded = load_step_data(path)
    assert loaded == items()
    assert loaded[1].prefix == () and loaded[2].labels == (1.0, None)  # lists become tuples, ints floats
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["pair", "pair", "rated"]
    assert lines[0] == {"kind": "pair", "question": Q, "prefix": ["4 * 2 = 8\n"], "chosen": "3 + 8 = 11\n",
                        "rejected": "3 + 8 = 12\n", "margin": 0.5, "source": "gold_corruption", "problem_id": "p1"}


@pytest.mark.parametrize("line, problem", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"kind": "triple"}', "\"kind\" must be one of 'pair', 'rated', got 'triple'"),
    ('{"kind": "pair", "question": "q", "prefix": [], "chosen": "a"}', "a pair needs the field(s) rejected"),
    ('{"kind": "pair", "question": "q", "prefix": [], "chosen": "a", "rejected": "b", "colour": 1}',
     "unknown field(s) for a pair: colour"),
    ('{"kind": "pair", "question": "q", "prefix": "a", "chosen": "a", "rejected": "b"}',
     "StepPair.prefix must be a list of strings, got str"),
    ('{"kind": "pair", "question": "q", "prefix": [], "chosen": "a", "rejected": "a"}',
     "StepPair: chosen and rejected are the same step ('a')"),
    ('{"kind": "rated", "question": "q", "steps": ["a"], "labels": [1.5]}',
     "RatedSteps.labels[0] must be a number in [0, 1] or null, got 1.5"),
    ('{"kind": "rated", "question": "q", "steps": ["a", "b"], "labels": [1]}', "RatedSteps: 2 steps but 1 labels"),
])
def test_a_bad_line_is_one_value_error_naming_file_and_line(tmp_path, line, problem):
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"kind": "pair", "question": "q", "prefix": [], "chosen": "a", "rejected": "b"})
    path.write_text(f"{good}\n\n{line}\n")
    with pytest.raises(ValueError) as info:
        load_step_data(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3: ") and problem in message
    assert "\n" not in message


def test_a_missing_file_and_a_bad_item_to_save_are_one_line_each(tmp_path):
    with pytest.raises(FileNotFoundError, match="no step data file at"):
        load_step_data(tmp_path / "absent.jsonl")
    with pytest.raises(ValueError, match="items must be StepPair or RatedSteps, got dict"):
        save_step_data(tmp_path / "x.jsonl", [{"question": "q"}])
    with pytest.raises(ValueError, match="StepPair.margin must be a finite number"):
        StepPair("q", (), "a", "b", margin=float("nan"))


def test_split_by_problem_keeps_each_problem_on_one_side_and_is_seeded():
    data = [StepPair(f"question {k}", (), f"good {i}", f"bad {i}", problem_id=f"p{k}")
            for k in range(10) for i in range(3)]
    data += [RatedSteps("no id", ("a",), (1.0,)), RatedSteps("no id", ("b",), (0.0,))]  # grouped by question
    train, held = split_by_problem(data, 0.3, seed=1)
    key = lambda item: item.problem_id or item.question  # noqa: E731
    assert not {key(i) for i in train} & {key(i) for i in held}
    assert len({key(i) for i in held}) == 3 and len(train) + len(held) == len(data)
    assert [i for i in data if i in held] == held  # order kept
    assert split_by_problem(data, 0.3, seed=1) == (train, held)
    assert split_by_problem(data, 0.3, seed=2) != (train, held)
    assert split_by_problem(data, 0.0, seed=1) == (data, [])
    two = data[:6]  # two problems: each side gets one even at a tiny or large fraction
    assert len({key(i) for i in split_by_problem(two, 0.01)[1]}) == 1
    assert len({key(i) for i in split_by_problem(two, 0.99)[0]}) == 1
    with pytest.raises(ValueError, match=r"held_out_fraction must be in \[0, 1\), got 1"):
        split_by_problem(data, 1)
