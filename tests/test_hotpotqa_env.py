"""HotpotQA-v0: closed-book and distractor prompts, EM/F1 rewards, both data layouts, the gymnasium checker."""

import warnings

import pytest
from gymnasium.utils.env_checker import check_env

from lmgym.envs import HotpotQAEnv, make, registered_ids
from tests.rag_toys import CORPUS, RECORDS

DIJON, LONDON, SAME_CITY = range(3)


def started(index: int, **kwargs) -> HotpotQAEnv:
    env = HotpotQAEnv(records=RECORDS, **kwargs)
    env.reset(options={"index": index})
    return env


def test_closed_book_prompt_is_the_question_and_the_answer_tag_is_graded_by_exact_match():
    env = HotpotQAEnv(records=RECORDS)
    obs, info = env.reset(options={"index": DIJON})
    assert obs == RECORDS[DIJON].question + "\nAnswer with a short phrase (or yes/no) in <answer>...</answer>."
    assert (env.mode, env.stop_strings, info["problem_id"], info["gold"]) == ("single", ["</answer>"], "dijon", "Dijon")
    _, reward, terminated, _, info = env.step("It is <answer>the Dijon.</answer>")
    assert (reward, terminated, info["correct"], info["parsed_answer"]) == (1.0, True, True, "the Dijon.")
    assert info["reward_components"] == {"em": 1.0, "f1": 1.0}
    assert info["supporting_titles"] == ["Eiffel Tower", "Gustave Eiffel"]


@pytest.mark.parametrize("index, action, em, f1", [
    (DIJON, "<answer>Dijon, France</answer>", 0.0, 2 / 3),     # F1: precision 1/2, recall 1
    (DIJON, "<answer>Paris</answer>", 0.0, 0.0),
    (DIJON, "Dijon", 0.0, 0.0),                                # no answer tag: unparseable
    (SAME_CITY, "<answer>No</answer>", 1.0, 1.0),
    (SAME_CITY, "<answer>no, they are not</answer>", 0.0, 0.0),  # HotpotQA: no partial credit around "no"
    (LONDON, "<answer>a</answer> then <answer>London</answer>", 1.0, 1.0),  # the last answer counts
])
def test_rewards_are_em_and_f1_weighted_half_each(index, action, em, f1):
    info = started(index).step(action)[4]
    assert info["reward_components"] == {"em": em, "f1": pytest.approx(f1)}
    assert info["correct"] is (em == 1.0)
    env = started(index)
    assert env.step(action)[1] == pytest.approx(0.5 * em + 0.5 * f1)


def test_distractor_prompt_holds_every_paragraph_titled_before_the_question():
    obs, _ = HotpotQAEnv(records=RECORDS, context="distractor").reset(options={"index": LONDON})
    for n, (title, text) in enumerate(CORPUS.items(), start=1):
        assert f"[{n}] {title}\n{text}" in obs
    assert obs.index("[6] Statue of Liberty") < obs.index("Question: Which city has both Big Ben and Tower Bridge?")


def test_reward_functions_can_be_replaced():
    env = started(DIJON, reward_fns={"length": lambda completion, gold, info: float(len(completion))})
    assert env.step("<answer>x</answer>")[1] == 18.0  # len("<answer>x</answer>")


def test_hotpotqa_is_registered_under_both_names_and_passes_the_gymnasium_checker():
    assert {"HotpotQA-v0", "RAG-HotpotQA-v0"} <= set(registered_ids())
    for env_id in ("HotpotQA-v0", "rlgym/HotpotQA-v0"):
        env = make(env_id, records=RECORDS, context="distractor")
        assert isinstance(env, HotpotQAEnv) and env.context == "distractor"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make("HotpotQA-v0", records=RECORDS))
        check_env(make("HotpotQA-v0", records=RECORDS, context="distractor"))


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match="^context must be one of 'closed_book', 'distractor'; got 'open'$"):
        HotpotQAEnv(records=RECORDS, context="open")
    with pytest.raises(ValueError, match="^pass either records or data_path/subset, not both$"):
        HotpotQAEnv("x.jsonl", records=RECORDS)
    with pytest.raises(ValueError, match="^records must be a non-empty list of HotpotQARecord$"):
        HotpotQAEnv(records=[])
    with pytest.raises(ValueError, match="^records must have distinct ids; a question id appears twice$"):
        HotpotQAEnv(records=RECORDS + RECORDS[:1])
    with pytest.raises(ValueError, match="^mode must be one of 'single'; got 'stepwise'$"):
        HotpotQAEnv(records=RECORDS, mode="stepwise")


# ---- the shared data: both layouts -------------------------------------------------------------------


def test_both_layouts_load_into_the_env_and_agree_on_shared_questions(shared_data):
    folder = shared_data / "hotpotqa"
    official = HotpotQAEnv(folder / "hotpot_dev_distractor_v1_first53.json", context="distractor")
    hub = HotpotQAEnv(folder / "dev_distractor_sample_seed0_n300.jsonl", context="distractor", subset=(0, 50))
    pooled = HotpotQAEnv(folder, context="distractor")  # a folder: every file in name order, each question once
    assert (official.num_problems, hub.num_problems, pooled.num_problems) == (53, 50, 846)
    from_jsonl = {record.id for record in pooled.records[:800]}  # the JSONL files come first by name
    shared = [record for record in official.records if record.id in from_jsonl]
    assert len(shared) == 7  # of the 10 questions SOURCE.md says the 53 share with the JSONL files (seed2 is absent)
    for record in shared:  # the same question read from either layout gives the same prompt and gold
        one = official.reset(options={"index": official.records.index(record)})
        other = pooled.reset(options={"index": pooled.records.index(pooled.record_by_id[record.id])})
        assert one == other and one[0].count("\n[") == len(record.context) - 1
    for env in (official, hub):
        _, info = env.reset(seed=0)
        _, reward, _, _, info = env.step(f"<answer>{info['gold']}</answer>")
        assert (reward, info["correct"]) == (1.0, True) and info["supporting_titles"]
