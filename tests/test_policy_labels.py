"""Labels from the policy's own samples: outcome labels and Monte-Carlo step labels from a scripted policy
whose completions per prefix are known, the token count, the budget, and the JSONL round trip."""
from __future__ import annotations

import gc
import importlib
import json
from collections import Counter

import pytest

from lmgym.buffers.step_pairs import RatedSteps
from lmgym.envs import make
from lmgym.policies import build_tiny_tokenizer
from lmgym.policies.base import Policy
from lmgym.policies.decoding.generation import Generation
from lmgym.traindata.step_data import (
    LabelledSample,
    PolicyLabelConfig,
    PolicyLabels,
    load_policy_labels,
    outcome_items,
    policy_labels,
    save_policy_labels,
    step_items,
)
from lmgym.traindata.step_data.policy_labels import LABEL_PRESETS, frozen_heap
from lmgym.training.config import ConfigError

policy_labels_module = importlib.import_module("lmgym.traindata.step_data.policy_labels")  # its function shadows it

# per solution so far, the options handed out in turn (cycling, counted per problem); {gold} is the problem's answer
SCRIPT = {"": ["Add.\n", "Subtract.\n", "Guess.\n"],
          "Add.\n": ["#### {gold}\n", "#### {gold}\n", "#### 0\n"],
          "Subtract.\n": ["#### 0\n", "#### 0\n", "#### {gold}\n", "#### 0\n"],
          "Guess.\n": ["#### 0\n"]}


class PatternPolicy(Policy):
    """Answers a prompt (question line + solution so far) with the next option of SCRIPT[solution so far],
    counted per (question, solution); counts sample calls and the prompts of each."""

    def __init__(self, golds: dict[str, int]):
        self.tokenizer = build_tiny_tokenizer()
        self.golds, self.used, self.calls = golds, Counter(), []

    def format_prompt(self, observation: str) -> list[int]:
        return self.encode_text(observation)

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        self.calls.append(len(prompts))
        out = []
        for ids in prompts:
            question, solution = self.tokenizer.decode(ids).split("\n", 1)
            options = SCRIPT[solution]
            text = options[self.used[(question, solution)] % len(options)].format(gold=self.golds[question])
            self.used[(question, solution)] += 1
            completion = self.encode_text(text)
            out.append([Generation(list(ids), completion, [0.0] * len(completion), text, "stop")])
        return out

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0):
        raise AssertionError("labelling never scores tokens")


def setup(problems: int = 2):
    env = make("Arithmetic-v0", level=1, split="test", mode="stepwise")
    golds = {env.reset(options={"index": i})[0].split("\n")[0]: env.get_problem(i).gold for i in range(problems)}
    return env, PatternPolicy(golds)


def expected(env, index: int) -> list[LabelledSample]:
    question, gold = env.reset(options={"index": index})[0], env.get_problem(index).gold
    pid = env.get_problem(index).problem_id
    right = f"#### {gold}\n"
    # sample 0 takes "Add." then option 0 (right); its 4 rollouts after "Add." take options 1, 2, 0, 1:
    # right, wrong, right, right -> 3/4, any -> 1. Sample 1: "Subtract." then option 0 (wrong); rollouts take
    # options 1, 2, 3, 0: wrong, right, wrong, wrong -> 1/4, any -> 1. Sample 2: "Guess." then wrong; rollouts
    # all wrong -> 0/4, any -> 0. A final step is labelled by its own verdict.
    return [LabelledSample(question, pid, ("Add.\n", right), True, str(gold), (0.75, 1.0), (1.0, 1.0),
                           len("Add.\n") + len(right)),  # one token a character
            LabelledSample(question, pid, ("Subtract.\n", "#### 0\n"), False, "0", (0.25, 0.0), (1.0, 0.0), 17),
            LabelledSample(question, pid, ("Guess.\n", "#### 0\n"), False, "0", (0.0, 0.0), (0.0, 0.0), 14)]


def test_mc_step_labels_match_hand_computed_fractions_in_batched_rounds():
    env, policy = setup()
    config = PolicyLabelConfig(problems=2, samples_per_problem=3, rollouts=4, batch_size=2)
    labels = policy_labels(policy, env, config)
    assert labels.samples == expected(env, 0) + expected(env, 1)
    # round 1: the first step of 2 x 3 solutions; round 2: their final step; round 3: the 4 rollouts of each of
    # the 6 live prefixes, all in one call
    assert policy.calls == [6, 6, 24]
    solution_tokens = sum(s.tokens for s in expected(env, 0) + expected(env, 1))
    rollout_tokens = sum(3 * len(f"#### {gold}\n") + 1 * len("#### 0\n")  # after "Add." (one token a character)
                         + 1 * len(f"#### {gold}\n") + 3 * len("#### 0\n") + 4 * len("#### 0\n")
                         for gold in (env.get_problem(0).gold, env.get_problem(1).gold))
    stats = labels.stats
    assert (stats["problems"], stats["samples"], stats["rollouts"], stats["engine_rounds"]) == (2, 6, 24, 3)
    assert (stats["solution_tokens"], stats["rollout_tokens"]) == (solution_tokens, rollout_tokens)
    assert stats["sampled_tokens"] == solution_tokens + rollout_tokens == 89 + 180  # golds 177 and 83
    assert stats["sample_accuracy"] == pytest.approx(2 / 6) and stats["pass_at_n"] == 1.0
    assert stats["tokens_per_second"] >= 0 and stats["stopped_by_budget"] is False


def test_batches_the_budget_and_outcome_only_labels():
    env, policy = setup()
    config = PolicyLabelConfig(problems=2, samples_per_problem=3, rollouts=4, batch_size=1, token_budget=1)
    labels = policy_labels(policy, env, config)
    assert labels.samples == expected(env, 0)  # the budget is reached after the first batch
    assert policy.calls == [3, 3, 12]
    assert labels.stats["problems"] == 1 and labels.stats["stopped_by_budget"] is True

    env, policy = setup(1)
    labels = policy_labels(policy, env, PolicyLabelConfig(samples_per_problem=3, rollouts=0),
                           starts=[{"options": {"index": 0}}])
    assert [(s.steps, s.correct, s.soft, s.hard) for s in labels.samples] == [
        (s.steps, s.correct, (), ()) for s in expected(env, 0)]
    assert policy.calls == [3, 3] and labels.stats["rollout_tokens"] == 0


def test_progress_is_reported_after_every_batch():
    env, policy = setup(3)
    seen = []
    config = PolicyLabelConfig(problems=3, samples_per_problem=3, rollouts=0, batch_size=2)
    labels = policy_labels(policy, env, config,
                           on_batch=lambda done, total, tokens, s: seen.append((done, total, tokens)))
    assert [(done, total) for done, total, _ in seen] == [(2, 3), (3, 3)]
    assert seen[-1][2] == labels.stats["sampled_tokens"] and 0 < seen[0][2] < seen[-1][2]


def test_items_for_the_orm_and_the_prm():
    env, _ = setup()
    samples = expected(env, 0)
    question, pid = samples[0].question, samples[0].problem_id
    assert outcome_items(samples)[:2] == [RatedSteps(question, samples[0].steps, (None, 1.0), "outcome", pid),
                                          RatedSteps(question, samples[1].steps, (None, 0.0), "outcome", pid)]
    assert [i.labels for i in step_items(samples)] == [(0.75, 1.0), (0.25, 0.0), (0.0, 0.0)]
    assert [i.labels for i in step_items(samples, "hard")] == [(1.0, 1.0), (1.0, 0.0), (0.0, 0.0)]
    unlabelled = LabelledSample(question, pid, ("Add.\n",), False)
    assert step_items([unlabelled]) == [] and outcome_items([LabelledSample(question, pid, (), False)]) == []
    with pytest.raises(ValueError, match="target must be one of soft, hard, got 'mean'"):
        step_items(samples, "mean")


def test_jsonl_round_trip_and_bad_lines(tmp_path):
    env, _ = setup()
    labels = PolicyLabels(expected(env, 0), {"sampled_tokens": 276, "seconds": 1.5, "stopped_by_budget": False})
    path = tmp_path / "labels" / "train.jsonl"
    save_policy_labels(path, labels)
    assert load_policy_labels(path) == labels
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], json.dumps({**json.loads(lines[1]), "soft": [0.5]})]) + "\n")
    with pytest.raises(ValueError, match=rf"^{path}:2: LabelledSample: 2 steps but 1 soft labels$"):
        load_policy_labels(path)
    path.write_text(lines[0] + "\n")
    with pytest.raises(ValueError, match=rf"^{path}: no labelled samples$"):
        load_policy_labels(path)
    with pytest.raises(FileNotFoundError, match="no policy labels file"):
        load_policy_labels(tmp_path / "missing.jsonl")


def test_the_presets_are_valid_configs():
    assert PolicyLabelConfig(**LABEL_PRESETS["gpu"]).samples_per_problem == 8
    assert PolicyLabelConfig(**LABEL_PRESETS["cpu"]).rollouts == 2


@pytest.mark.parametrize("field, value, expected_line", [
    ("samples_per_problem", 0, "PolicyLabelConfig.samples_per_problem must be an int >= 1, got 0"),
    ("rollouts", -1, "PolicyLabelConfig.rollouts must be an int >= 0, got -1"),
    ("temperature", 0.0, "PolicyLabelConfig.temperature must be > 0, got 0.0"),
])
def test_config_errors_are_one_line(field, value, expected_line):
    with pytest.raises(ConfigError) as error:
        PolicyLabelConfig(**{field: value})
    assert str(error.value) == expected_line



class RecordingGc:
    """The `gc` module as policy_labels sees it, recording freeze and unfreeze calls (`gc.get_freeze_count()`
    walks every frozen object, so the tests ask this record instead while the heap is frozen)."""

    def __init__(self):
        self.events: list[str] = []
        self.isenabled, self.get_freeze_count, self.get_threshold = gc.isenabled, gc.get_freeze_count, gc.get_threshold

    def set_threshold(self, *thresholds: int) -> None:
        self.events.append(f"threshold {thresholds[2]}")
        gc.set_threshold(*thresholds)

    def freeze(self) -> None:
        self.events.append("freeze")
        gc.freeze()

    def unfreeze(self) -> None:
        self.events.append("unfreeze")
        gc.unfreeze()

    def collect(self, *generation: int) -> int:
        self.events.append("collect")
        return gc.collect(*generation)

    @property
    def frozen(self) -> bool:
        """Frozen, with full collections spaced out: the last two events are the block's start."""
        return self.events[-2:] == ["freeze", f"threshold {policy_labels_module.FULL_COLLECTION_SPACING}"]


class FreezeWatchingPolicy(PatternPolicy):
    """PatternPolicy that records, at each sample call, whether the labelling froze the heap."""

    def __init__(self, golds: dict[str, int], recorder: RecordingGc):
        super().__init__(golds)
        self.recorder, self.frozen = recorder, []

    def sample(self, prompts, *args, **kwargs):
        self.frozen.append(self.recorder.frozen)
        return super().sample(prompts, *args, **kwargs)


def test_labelling_runs_with_the_heap_before_it_frozen_and_unfreezes_it_after(monkeypatch):
    recorder = RecordingGc()
    monkeypatch.setattr(policy_labels_module, "gc", recorder)
    env, plain = setup()
    policy = FreezeWatchingPolicy(plain.golds, recorder)
    assert gc.get_freeze_count() <= policy_labels_module.INTERPRETER_FROZEN  # Python 3.12 starts with some frozen
    labels = policy_labels(policy, env, PolicyLabelConfig(problems=2, samples_per_problem=3, rollouts=4,
                                                          batch_size=1))
    assert labels.samples == expected(env, 0) + expected(env, 1)  # the same labels
    assert len(policy.frozen) >= 4 and all(policy.frozen)  # every call (2 batches, 3 rounds each) ran frozen
    spaced, usual = policy_labels_module.FULL_COLLECTION_SPACING, gc.get_threshold()[2]
    assert usual < spaced  # CPython's default (10): the block raised it, and put it back
    assert recorder.events == ["freeze", f"threshold {spaced}", "collect", f"threshold {usual}", "unfreeze"]
    assert gc.get_freeze_count() == 0  # nothing stays frozen


def test_the_frozen_heap_leaves_a_freeze_or_a_disabled_collector_it_did_not_make_alone(monkeypatch):
    recorder = RecordingGc()
    monkeypatch.setattr(policy_labels_module, "gc", recorder)
    gc.freeze()  # someone else's freeze
    try:
        with frozen_heap() as froze:
            assert froze is False
    finally:
        gc.unfreeze()
    assert recorder.events == []  # their freeze was neither redone nor undone
    gc.disable()
    try:
        with frozen_heap() as froze:
            assert froze is False
    finally:
        gc.enable()
    assert recorder.events == []
    thresholds = gc.get_threshold()
    with pytest.raises(RuntimeError), frozen_heap() as froze:  # an error inside still unfreezes
        assert froze is True and recorder.frozen
        raise RuntimeError("inside")
    assert recorder.events[0] == "freeze" and recorder.events[-1] == "unfreeze" and gc.get_freeze_count() == 0
    assert gc.get_threshold() == thresholds  # and puts the threshold back


def test_the_interpreters_own_frozen_objects_do_not_stop_the_block(monkeypatch):
    """Python 3.12 starts with a few hundred objects in the permanent generation (375 on 3.12.1). They are not
    someone else's freeze: counted as one, they made the block a no-op on the H200 hosts' Python 3.12."""
    recorder = RecordingGc()
    monkeypatch.setattr(policy_labels_module, "gc", recorder)
    gc.freeze()  # as the interpreter left them at start-up, before lmgym was imported
    try:
        monkeypatch.setattr(policy_labels_module, "INTERPRETER_FROZEN", gc.get_freeze_count())
        with frozen_heap() as froze:
            assert froze is True and recorder.frozen
    finally:
        gc.unfreeze()
    assert recorder.events[0] == "freeze" and recorder.events[-1] == "unfreeze"


def test_leaving_the_frozen_heap_leaves_no_full_collection_due():
    """Young collections counted inside the block (where full ones are spaced out) would make the first full
    collection after it walk the whole unfrozen heap; the block ends with a full collection while still frozen
    (only its own objects), so none is due when it is left."""
    spaced = []
    with frozen_heap() as froze:
        assert froze
        for _ in range(gc.get_threshold()[0] * gc.get_threshold()[1] * 15):  # > 10 young collections of gen 1
            spaced.append([{}])
        assert gc.get_count()[2] > 10  # CPython's default threshold for a full collection, passed inside
        spaced.clear()
    assert gc.get_count()[2] == 0


def test_overlapped_batches_give_the_same_labels_in_fewer_engine_calls(monkeypatch):
    """overlap_batches: a batch's rollouts play in the engine call of the next batch's solutions (one tail a batch,
    not two); with a sample_key every action is keyed by its branch alone, so the labels are the same, and progress
    is still reported once a batch's samples are done."""
    from lmgym.episodes.engine import EpisodeEngine
    from lmgym.policies import HFPolicy, build_tiny_model

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=2), tok, device="cpu", fast_decode=True)
    env = make("Arithmetic-v0", level=2, split="train", mode="stepwise", max_steps=3)
    calls = []
    play = EpisodeEngine.play
    monkeypatch.setattr(EpisodeEngine, "play", lambda self, branches, *a, **k: calls.append(len(branches)) or
                        play(self, branches, *a, **k))

    def run(overlap):
        calls.clear()
        progress = []
        config = PolicyLabelConfig(problems=3, samples_per_problem=2, rollouts=2, max_new_tokens=8, batch_size=1,
                                   overlap_batches=overlap)
        labels = policy_labels(policy, env, config, sample_key=4, on_batch=lambda done, *_: progress.append(done))
        return labels, list(calls), progress

    plain, plain_calls, plain_progress = run(False)
    overlapped, overlapped_calls, overlapped_progress = run(True)
    assert overlapped.samples == plain.samples
    assert overlapped.stats["sampled_tokens"] == plain.stats["sampled_tokens"]
    assert overlapped.stats["rollouts"] == plain.stats["rollouts"] > 0
    assert len(plain_calls) == 6 and len(overlapped_calls) == 4  # 3 batches: 2 calls each, or 1 each and 1 more
    assert plain_progress == overlapped_progress == [1, 2, 3]
