"""HotpotQA records: both layouts, a folder, the hub path, and one-line errors for bad records."""
import json

import pytest

from lmgym.envs.data import MalformedRowError
from lmgym.envs.hotpotqa.data import load_hotpotqa, record_from_row

HUB_ROW = {"id": "q1", "question": "Who?", "answer": "Ann", "type": "bridge", "level": "easy",
           "supporting_facts": {"title": ["A", "B", "A"], "sent_id": [0, 1, 2]},
           "context": {"title": ["A", "B"], "sentences": [["a0", "a1", "a2"], ["b0", "b1"]]}}
OFFICIAL_ROW = {"_id": "q1", "question": "Who?", "answer": "Ann", "type": "bridge", "level": "easy",
                "supporting_facts": [["A", 0], ["B", 1], ["A", 2]],
                "context": [["A", ["a0", "a1", "a2"]], ["B", ["b0", "b1"]]]}


def test_both_layouts_make_the_same_record():
    hub, official = record_from_row(HUB_ROW), record_from_row(OFFICIAL_ROW)
    assert hub == official
    assert hub.supporting_titles == ("A", "B")
    assert hub.context == (("A", ("a0", "a1", "a2")), ("B", ("b0", "b1")))


def test_the_shared_files_agree_where_they_overlap(shared_data):
    folder = shared_data / "hotpotqa"
    official = {r.id: r for r in load_hotpotqa(folder / "hotpot_dev_distractor_v1_first53.json")}
    jsonl = [r for f in sorted(folder.glob("*.jsonl")) for r in load_hotpotqa(f)]
    both = [r for r in jsonl if r.id in official]
    assert both and all(r == official[r.id] for r in both)  # field for field, after the layout mapping
    pooled = load_hotpotqa(folder)
    assert len(pooled) == len({r.id for r in pooled}) == len(jsonl) + len(official) - len(both)


def test_subset_and_a_folder_without_files(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({**HUB_ROW, "id": f"q{i}"}) + "\n" for i in range(5)))
    assert [r.id for r in load_hotpotqa(path, subset=(1, 3))] == ["q1", "q2"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no .jsonl or .json HotpotQA file"):
        load_hotpotqa(tmp_path / "empty")


@pytest.mark.parametrize("change, what", [
    ({"answer": None}, "answer must be a string"),
    ({"supporting_facts": {"title": ["A"], "sent_id": [0, 1]}}, "supporting_facts/context"),
    ({"context": [["A"]]}, "supporting_facts/context"),
])
def test_a_malformed_record_is_one_line_naming_it(tmp_path, change, what):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(HUB_ROW) + "\n" + json.dumps({**HUB_ROW, **change}) + "\n")
    with pytest.raises(MalformedRowError, match="bad.jsonl record 2: not a HotpotQA record") as err:
        load_hotpotqa(path)
    assert what in str(err.value) and "\n" not in str(err.value)


def test_the_hub_path_goes_through_datasets(monkeypatch):
    import datasets

    calls = []

    def fake_load_dataset(name, config, split):
        calls.append((name, config, split))
        return datasets.Dataset.from_list([HUB_ROW])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    assert load_hotpotqa(None, split="validation") == [record_from_row(HUB_ROW)]
    assert calls == [("hotpot_qa", "distractor", "validation")]
