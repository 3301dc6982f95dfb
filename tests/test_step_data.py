"""Step-preference data: gold corruptions, the Arithmetic-v0 gold solver, GSM8K steps on real rows, the
PRM800K loader on the real sample, and Math-Shepherd labels with a scripted policy."""
from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from lmgym.buffers.step_pairs import RatedSteps, StepPair
from lmgym.envs import make
from lmgym.envs.arithmetic import generate, split_indices
from lmgym.policies import build_tiny_tokenizer
from lmgym.policies.base import Policy
from lmgym.policies.decoding.generation import Generation
from lmgym.traindata.step_data import (
    KINDS,
    ShepherdConfig,
    arithmetic_pairs,
    arithmetic_steps,
    corruptions,
    gold_step_pairs,
    gsm8k_pairs,
    gsm8k_solution_steps,
    load_prm800k,
    shepherd_data,
)
from lmgym.traindata.step_data.equations import find_equations
from lmgym.training.config import ConfigError
from tests.tiers import slow

NATALIA = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
           "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")


def test_gsm8k_answers_become_steps_without_annotations():
    assert gsm8k_solution_steps(NATALIA) == ("Natalia sold 48/2 = 24 clips in May.\n",
                                             "Natalia sold 48+24 = 72 clips altogether in April and May.\n",
                                             "#### 72\n")
    with pytest.raises(ValueError, match="no '#### <number>' line"):
        gsm8k_solution_steps("Natalia sold 48/2 = 24 clips.")


def test_corruptions_of_a_hand_worked_step():
    steps = gsm8k_solution_steps(NATALIA)
    found = corruptions(steps, 0, random.Random(0))
    assert found["wrong_operation"] == "Natalia sold 48*2 = 96 clips in May.\n"  # the one operator, recomputed
    assert found["dropped_step"] == steps[1]
    changed = found["wrong_number"]
    assert changed.startswith("Natalia sold 48/2 = ") and changed.endswith(" clips in May.\n") and changed != steps[0]
    last = corruptions(steps, 2, random.Random(0))
    assert set(last) == {"wrong_number"} and last["wrong_number"].startswith("#### ")  # nothing to drop or swap
    three = corruptions(("Betty needs 100 - 50 - 30 = $20 more.\n",), 0, random.Random(1), ["wrong_operation"])
    assert three["wrong_operation"] in {"Betty needs 100 + 50 - 30 = $120 more.\n",
                                        "Betty needs 100 - 50 + 30 = $80 more.\n"}
    with pytest.raises(ValueError, match="unknown corruption kind 'typo'"):
        corruptions(steps, 0, random.Random(0), ["typo"])


def test_equations_are_read_with_precedence_and_a_leading_minus():
    (equation,) = find_equations("-7 + 3 * 2 = -1 and more")
    assert [str(n) for n in equation.numbers] == ["-7", "3", "2"] and equation.ops == ("+", "*")
    assert find_equations("It costs $20 x 3 = $60.")[0].ops == ("x",)
    assert find_equations("He is 12 years old = young") == []


def test_gold_pairs_differ_from_gold_and_are_deterministic_per_seed():
    steps = ("12 * 3 = 36\n", "5 - 36 = -31\n", "#### -31\n")
    pairs = gold_step_pairs("Q\n", steps, "arithmetic/L3/7", seed=3, source="arithmetic")
    assert pairs == gold_step_pairs("Q\n", steps, "arithmetic/L3/7", seed=3, source="arithmetic")
    assert all(p.chosen == steps[len(p.prefix)] and p.prefix == steps[:len(p.prefix)] for p in pairs)
    assert all(p.rejected != p.chosen for p in pairs)
    assert Counter(p.source for p in pairs) == {"arithmetic_wrong_number": 3, "arithmetic_wrong_operation": 2,
                                                "arithmetic_dropped_step": 2}
    seeds = {tuple(p.rejected for p in gold_step_pairs("Q\n", steps, "arithmetic/L3/7", seed=s)) for s in range(6)}
    assert len(seeds) > 1  # the seed picks the corruptions


def test_the_arithmetic_gold_solver_reaches_every_sampled_answer():
    assert arithmetic_steps("What is 12 + 7 * 3?") == ("7 * 3 = 21\n", "12 + 21 = 33\n", "#### 33\n")
    assert arithmetic_steps("What is 5 - 12 - 3?") == ("5 - 12 = -7\n", "-7 - 3 = -10\n", "#### -10\n")
    word = generate(4, 5)
    assert word.question.startswith("Sara has 5 apples, buys 2 bags of 2 apples, and gives away 6")
    assert arithmetic_steps(word.question) == ("2 * 2 = 4\n", "5 + 4 = 9\n", "9 - 6 = 3\n", "#### 3\n")
    for level in range(5):
        indices = split_indices(level, "test")
        for index in random.Random(level).sample(list(indices), min(60, len(indices))):
            problem = generate(level, int(index))
            assert arithmetic_steps(problem.question)[-1] == f"#### {problem.answer}\n", problem
    with pytest.raises(ValueError, match="not an Arithmetic-v0 question"):
        arithmetic_steps("Why is the sky blue?")


def test_arithmetic_pairs_use_the_stepwise_observation():
    pairs = arithmetic_pairs([3, 4], problems_per_level=3, split="train", seed=1)
    env = make("Arithmetic-v0", level=3, split="train", mode="stepwise")
    assert {p.problem_id.split("/")[1] for p in pairs} == {"L3", "L4"}
    assert len({p.problem_id for p in pairs}) == 6
    first = pairs[0]
    index = list(split_indices(3, "train")).index(int(first.problem_id.split("/")[2]))
    assert first.question == env.reset(options={"index": index})[0] and first.question.endswith("####.\n")
    assert pairs == arithmetic_pairs([3, 4], problems_per_level=3, split="train", seed=1)




@slow
def test_gsm8k_rows_split_into_steps_and_pairs(gsm8k_train):
    with open(gsm8k_train, encoding="utf-8") as handle:
        rows = [json.loads(next(handle)) for _ in range(30)]
    for row in rows:
        steps = gsm8k_solution_steps(row["answer"])
        assert steps[-1].startswith("#### ") and all(s.endswith("\n") and "<<" not in s for s in steps)
        assert len(steps) == len([line for line in row["answer"].split("\n") if line.strip()])
    pairs = gsm8k_pairs(gsm8k_train, subset=(0, 30), seed=0)
    env = make("GSM8KStepwise-v0", data_path=str(gsm8k_train), subset=(0, 30))
    assert pairs[0].question == env.reset(options={"index": 0})[0]
    assert pairs[0].prefix == () and pairs[0].chosen == "Natalia sold 48/2 = 24 clips in May.\n"
    assert {p.problem_id for p in pairs} == {f"gsm8k/train/{i}" for i in range(30)}
    assert all(p.rejected != p.chosen for p in pairs)
    assert {p.source for p in pairs} == {f"gsm8k_{kind}" for kind in KINDS}


PRM800K_SAMPLE = "prm800k/prm800k_raw_sample.jsonl"


def test_prm800k_sample_gives_every_rating_once_and_the_pairs(shared_data):
    path = shared_data / PRM800K_SAMPLE
    items = load_prm800k(path)
    rated = [i for i in items if isinstance(i, RatedSteps)]
    pairs = [i for i in items if isinstance(i, StepPair)]
    labels = Counter(label for r in rated for label in r.labels if label is not None)
    assert labels == {1.0: 145, 0.5: 62, 0.0: 97}  # SOURCE.md: +1: 145, 0: 62, -1: 97 (and 7 unrated)
    assert len({i.problem_id for i in items}) == 11  # 16 records; six rate the same problem
    expected_pairs = 0
    for line in path.read_text().splitlines():
        for step in json.loads(line)["label"]["steps"]:
            counts = Counter(c["rating"] for c in step["completions"] or [] if c["rating"] is not None)
            expected_pairs += counts[1] * counts[0] + counts[1] * counts[-1] + counts[0] * counts[-1]
    assert len(pairs) == expected_pairs
    assert {p.margin for p in pairs} == {0.5, 1.0}
    first = json.loads(path.read_text().splitlines()[0])
    path_item = rated[0]
    assert path_item.question == (first["question"]["problem"]
                                  + "\nSolve it step by step, then put the final answer in \\boxed{}.\n")
    assert path_item.steps[0] == first["label"]["steps"][0]["completions"][0]["text"] + "\n"
    assert len(path_item.steps) == len(first["label"]["steps"])  # a finished solution: its whole path


def test_a_bad_prm800k_line_is_one_error_naming_it(tmp_path, shared_data):
    good = (shared_data / PRM800K_SAMPLE).read_text().splitlines()[0]
    record = json.loads(good)
    record["label"]["steps"][0]["completions"][0]["rating"] = 5
    path = tmp_path / "bad.jsonl"
    path.write_text(good + "\n\n" + json.dumps(record) + "\n")
    with pytest.raises(ValueError) as error:
        load_prm800k(path)
    assert str(error.value) == f"{path}:3: rating must be -1, 0, 1 or null; got 5"
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match=rf"^{path}:1: not valid JSON"):
        load_prm800k(path)
    with pytest.raises(FileNotFoundError, match="PRM800K file not found"):
        load_prm800k(tmp_path / "missing.jsonl")


class ScriptedPolicy(Policy):
    """Answers each prompt with the next option (cycling) of `script[solution so far]`; counts sample calls."""

    def __init__(self, script: dict[str, list[str]], marker: str):
        self.tokenizer = build_tiny_tokenizer()
        self.script, self.marker, self.used, self.sample_calls = script, marker, Counter(), 0

    def format_prompt(self, observation: str) -> list[int]:
        return self.encode_text(observation)

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        self.sample_calls += 1
        out = []
        for ids in prompts:
            state = self.tokenizer.decode(ids).split(self.marker, 1)[1]
            options = self.script[state]
            text = options[self.used[state] % len(options)]
            self.used[state] += 1
            completion = self.encode_text(text)
            out.append([Generation(list(ids), completion, [0.0] * len(completion), text, "stop")])
        return out

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0):
        raise AssertionError("the step-data builders never score tokens")


def test_shepherd_labels_and_pairs_from_a_scripted_policy():
    env = make("Arithmetic-v0", level=1, split="test", mode="stepwise")
    gold = env.get_problem(0).gold
    right, wrong = f"#### {gold}\n", "#### 0\n"
    script = {"": ["Add.\n", "Subtract.\n"],
              "Add.\n": [right, right, right, wrong],
              "Subtract.\n": [wrong, right, wrong, wrong]}
    policy = ScriptedPolicy(script, "####.\n")
    data = shepherd_data(policy, env, [{"options": {"index": 0}}],
                         ShepherdConfig(solutions_per_problem=2, rollouts=4, margin=0.5))
    question = env.reset(options={"index": 0})[0]
    # solutions take "Add." and "Subtract." (one call), then "#### gold" and "#### 0"; the 4 rollouts after
    # "Add." continue its cycle at option 1: right, right, wrong, right -> 3/4; after "Subtract.": right,
    # wrong, wrong, wrong -> 1/4 (all 8 in one call); final steps are labelled by their own verdict
    pid = env.get_problem(0).problem_id
    assert data.rated == [RatedSteps(question, ("Add.\n", right), (0.75, 1.0), "shepherd", pid),
                          RatedSteps(question, ("Subtract.\n", wrong), (0.25, 0.0), "shepherd", pid)]
    assert data.pairs == [StepPair(question, (), "Add.\n", "Subtract.\n", 0.5, "shepherd", pid),
                          StepPair(question, ("Add.\n",), right, wrong, 1.0, "policy_sibling", pid),
                          StepPair(question, ("Subtract.\n",), right, wrong, 1.0, "policy_sibling", pid)]
    assert policy.sample_calls == 3  # two solution steps, then every rollout of every prefix together
    sampled = ["Add.\n", right, "Subtract.\n", wrong, right, right, wrong, right, right, wrong, wrong, wrong]
    assert data.tokens == sum(len(text) for text in sampled)  # one token a character

    policy = ScriptedPolicy(script, "####.\n")
    strict = shepherd_data(policy, env, [{"options": {"index": 0}}],
                           ShepherdConfig(solutions_per_problem=2, rollouts=4, margin=0.6))
    assert [(p.prefix, p.source) for p in strict.pairs] == [
        ((), "policy_sibling"), (("Add.\n",), "policy_sibling"), (("Subtract.\n",), "policy_sibling")]


@pytest.mark.parametrize("field, value, expected", [
    ("rollouts", 0, "ShepherdConfig.rollouts must be an int >= 1, got 0"),
    ("margin", 1.5, "ShepherdConfig.margin must be in (0, 1], got 1.5"),
    ("temperature", 0.0, "ShepherdConfig.temperature must be > 0, got 0.0"),
])
def test_shepherd_config_errors_are_one_line(field, value, expected):
    with pytest.raises(ConfigError) as error:
        ShepherdConfig(**{field: value})
    assert str(error.value) == expected


def test_shepherd_leaves_out_the_empty_step_that_ends_an_episode():
    env = make("Arithmetic-v0", level=1, split="test", mode="stepwise")
    gold = env.get_problem(0).gold
    script = {"": ["Add.\n"], "Add.\n": [f"{gold}\n", "1\n"], f"Add.\n{gold}\n": [""], "Add.\n1\n": [""]}
    data = shepherd_data(ScriptedPolicy(script, "####.\n"), env, [{"options": {"index": 0}}],
                         ShepherdConfig(solutions_per_problem=1, rollouts=2, margin=0.5))
    # the solution: "Add.", "<gold>", "" (the empty step ends it, graded by its last number: right); the 2
    # rollouts after "Add." take "1" then "" (wrong) and "<gold>" then "" (right) -> 0.5; after "<gold>": "" (right)
    assert data.rated == [RatedSteps(env.reset(options={"index": 0})[0], ("Add.\n", f"{gold}\n"), (0.5, 1.0),
                                     "shepherd", env.get_problem(0).problem_id)]
    assert [(p.prefix, p.chosen, p.rejected, p.source) for p in data.pairs] == [
        (("Add.\n",), f"{gold}\n", "1\n", "policy_sibling")]
