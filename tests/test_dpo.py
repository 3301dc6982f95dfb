"""DPO, IPO and length-normalised DPO: the loss against hand values, learning a fixed pair set on the tiny
model, the fixed reference (a frozen copy, or the LoRA adapter disabled), resume, and bad data in one line."""
import json
import math

import pytest
import torch

from lmgym.algorithms import DPO, IPO, DPOConfig, LengthNormalizedDPO, dpo_loss
from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from lmgym.traindata import PreferencePair
from lmgym.traindata.preference_data import load_preference_pairs, save_preference_pairs
from lmgym.training import ConfigError
from tests.tiers import slow

PAIRS = [PreferencePair("2+3=", "5", "7"), PreferencePair("4+4=", "8", "9"), PreferencePair("6-1=", "5", "15"),
         PreferencePair("1+2=", "3", "12"), PreferencePair("9-3=", "6", "3"), PreferencePair("2*4=", "8", "6")]


def t(*values):
    return torch.tensor(values, dtype=torch.float32)


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))


# ---------------------------------------------------------------------- the loss, by hand
def test_the_sigmoid_loss_with_and_without_label_smoothing_matches_hand_values():
    # pair 0: h = (-1 - -3) - (-2 - -2) = 2; pair 1: h = (-5 - -4) - (-3 - -3) = -1; beta = 0.5
    args = (t(-1, -5), t(-3, -4), t(-2, -3), t(-2, -3))
    assert dpo_loss(*args, beta=0.5).tolist() == pytest.approx([softplus(-1.0), softplus(0.5)], abs=1e-6)
    smoothed = dpo_loss(*args, beta=0.5, label_smoothing=0.1)
    assert smoothed.tolist() == pytest.approx([0.9 * softplus(-1.0) + 0.1 * softplus(1.0),
                                               0.9 * softplus(0.5) + 0.1 * softplus(-0.5)], abs=1e-6)
    assert dpo_loss(t(-3.0), t(-3.0), t(-3.0), t(-3.0), beta=0.1).item() == pytest.approx(math.log(2), abs=1e-7)


def test_the_ipo_loss_matches_hand_values():
    # h = 2 and h = 3, beta = 0.5: (h - 1/(2 beta))^2 = 1 and 4; beta = 0.25: (2 - 2)^2 = 0
    assert dpo_loss(t(-1, 0), t(-3, -3), t(0, 0), t(0, 0), 0.5, "ipo").tolist() == pytest.approx([1.0, 4.0])
    assert dpo_loss(t(-1.0), t(-3.0), t(0.0), t(0.0), 0.25, "ipo").item() == pytest.approx(0.0)


def test_the_length_normalised_loss_divides_each_log_ratio_by_its_completion_length():
    # chosen: (-4 - -6) / 2 = 1; rejected: (-9 - -6) / 3 = -1; h = 2, beta = 0.5 -> softplus(-1)
    args = (t(-4.0), t(-9.0), t(-6.0), t(-6.0), 0.5)
    normalised = dpo_loss(*args, chosen_lengths=t(2.0), rejected_lengths=t(3.0))
    assert normalised.item() == pytest.approx(softplus(-1.0), abs=1e-6)
    assert dpo_loss(*args).item() == pytest.approx(softplus(-2.5), abs=1e-6)  # summed: h = 2 + 3 = 5
    ipo = dpo_loss(*args, kind="ipo", chosen_lengths=t(2.0), rejected_lengths=t(3.0))
    assert ipo.item() == pytest.approx(1.0, abs=1e-6)  # (2 - 1)^2


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "hinge"}, "dpo_loss: kind must be one of sigmoid, ipo, got 'hinge'"),
    ({"beta": 0.0}, "dpo_loss: beta must be > 0, got 0.0"),
    ({"kind": "ipo", "label_smoothing": 0.1}, "dpo_loss: label_smoothing must be in [0, 0.5) (0 for ipo), got 0.1"),
    ({"chosen_lengths": t(1.0)}, "dpo_loss: give both chosen_lengths and rejected_lengths, or neither"),
])
def test_bad_loss_arguments_are_one_line(kwargs, message):
    args = {"beta": 0.1, **kwargs}
    with pytest.raises(ValueError) as info:
        dpo_loss(t(0.0), t(0.0), t(0.0), t(0.0), **args)
    assert str(info.value) == message


# ---------------------------------------------------------------------- training on the tiny model
def tiny(lora: LoraSettings | None = None) -> HFPolicy:
    tok = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu", lora=lora)


def config(run_dir, iterations: int = 8, **overrides) -> DPOConfig:
    values = dict(train_iterations=iterations, pairs_per_iteration=6, micro_batch_size=6, learning_rate=3e-3,
                  beta=0.5, eval_every=0, progress=False, output_dir=str(run_dir))
    return DPOConfig(**{**values, **overrides})


@slow
@pytest.mark.parametrize("cls", [DPO, IPO, LengthNormalizedDPO])
def test_training_raises_the_chosen_vs_rejected_margin_on_a_fixed_pair_set(cls, tmp_path):
    trainer = cls(tiny(), PAIRS, config(tmp_path), held_out=PAIRS)
    rows = trainer.train()
    start, end = rows[0], rows[-1]
    assert start["eval_reward_margin"] == pytest.approx(0.0, abs=1e-5)  # the policy is the reference
    assert start["eval_reward_accuracy"] == pytest.approx(0.5)          # every pair a tie
    assert rows[1]["reward_chosen"] == pytest.approx(0.0, abs=1e-5)    # the first step starts at the reference
    if cls is not IPO:
        assert rows[1]["dpo"] == pytest.approx(math.log(2), abs=1e-5)
    assert end["eval_reward_margin"] > 0.5
    assert end["eval_reward_accuracy"] == 1.0
    assert end["eval_loss"] < start["eval_loss"]
    assert json.loads((tmp_path / "config.json").read_text())["algorithm"] == cls.__name__


def test_the_reference_stays_the_initial_model(tmp_path):
    trainer = DPO(tiny(), PAIRS, config(tmp_path, iterations=3))
    initial = [p.detach().clone() for p in trainer.ref_policy.model.parameters()]
    cached = trainer.ref_logps.clone()
    trainer.train()
    assert all(torch.equal(a, b) for a, b in zip(initial, trainer.ref_policy.model.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(initial, trainer.policy.model.parameters()))
    assert torch.allclose(trainer.reference_logprobs(trainer.pairs), cached, atol=1e-5)
    assert not torch.allclose(trainer.pair_logprobs(trainer.policy, trainer.pairs)[0].detach(), cached, atol=1e-3)


def test_under_lora_the_reference_is_the_policy_with_its_adapter_disabled(tmp_path):
    policy = tiny(LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))
    trainer = DPO(policy, PAIRS, config(tmp_path, iterations=6, learning_rate=1e-2), held_out=PAIRS)
    assert trainer.ref_policy.model is policy.model  # no second copy of the weights
    base = DPO(tiny(), PAIRS, config(tmp_path / "base", iterations=1))  # the same weights, no adapter
    assert torch.allclose(trainer.ref_logps, base.ref_logps, atol=1e-5)
    rows = trainer.train()
    assert rows[-1]["eval_reward_margin"] > rows[0]["eval_reward_margin"] + 0.1
    assert torch.allclose(trainer.reference_logprobs(trainer.pairs), base.ref_logps, atol=1e-5)  # adapter off
    assert not torch.allclose(trainer.pair_logprobs(policy, trainer.pairs)[0].detach(), base.ref_logps, atol=1e-3)


@slow
def test_a_run_resumed_at_2_equals_an_uninterrupted_run_to_4(tmp_path):
    def run(folder, iterations, resume=False):
        settings = config(tmp_path / folder, iterations, pairs_per_iteration=4, micro_batch_size=2, save_every=1,
                          eval_every=2)
        trainer = DPO(tiny(), PAIRS, settings, held_out=PAIRS[:2])
        return trainer, trainer.train(resume=resume)

    whole, whole_rows = run("whole", 4)
    run("split", 2)
    resumed, rows = run("split", 4, resume=True)
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3, 4]
    for mine, theirs in zip(rows, whole_rows):
        for key in ("loss", "dpo", "grad_norm", "reward_margin", "reward_accuracy", "eval_reward_margin"):
            if key in theirs:
                assert mine[key] == pytest.approx(theirs[key], abs=1e-6), (mine["iteration"], key)
    for a, b in zip(resumed.policy.parameters(), whole.policy.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


@slow
def test_the_step_is_the_same_whatever_the_micro_batch_size(tmp_path):
    steps = {}
    for size in (1, 6):
        trainer = DPO(tiny(), PAIRS, config(tmp_path / str(size), iterations=1, micro_batch_size=size))
        stats = trainer.run_iteration()
        steps[size] = (stats, [p.grad.clone() for p in trainer.policy.parameters()])  # grads stay after the step
    assert steps[1][0]["loss"] == pytest.approx(steps[6][0]["loss"], abs=1e-6)
    assert steps[1][0]["reward_margin"] == pytest.approx(steps[6][0]["reward_margin"], abs=1e-6)
    assert steps[1][0]["grad_norm"] == pytest.approx(steps[6][0]["grad_norm"], rel=1e-5)
    for a, b in zip(steps[1][1], steps[6][1]):
        assert torch.allclose(a, b, atol=1e-6)


def test_long_completions_are_cut_to_max_length_and_a_prompt_without_room_is_refused(tmp_path):
    policy = tiny()
    prompt_tokens = len(policy.format_prompt("2+3="))
    pair = PreferencePair("2+3=", "5" * 30, "7")
    trainer = DPO(policy, [pair], config(tmp_path, max_length=prompt_tokens + 4))
    assert len(trainer.pairs[0].chosen) == 4 and trainer.pairs[0].rejected[0] == policy.encode_text("7")[0]
    assert trainer.describe()["truncated_pairs"] == 1
    with pytest.raises(ValueError) as info:
        DPO(policy, PAIRS[:1] + [pair], config(tmp_path, max_length=prompt_tokens))
    assert str(info.value) == (f"DPO: pairs[0]: the prompt has {prompt_tokens} tokens: max_length={prompt_tokens} "
                               f"leaves no room for a completion")


def test_bad_trainer_input_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"^DPO: held_out\[1\]: expected a PreferencePair, got tuple$"):
        DPO(tiny(), PAIRS, config(tmp_path), held_out=[PAIRS[0], ("q", "a", "b")])
    with pytest.raises(ValueError, match="^DPO: no preference pairs to train on$"):
        DPO(tiny(), [], config(tmp_path))
    with pytest.raises(ConfigError, match=r"^DPOConfig.label_smoothing must be 0 for IPO, got 0.1$"):
        IPO(tiny(), PAIRS, config(tmp_path, label_smoothing=0.1))
    with pytest.raises(ConfigError, match=r"^DPOConfig.beta must be > 0, got 0.0$"):
        DPOConfig(beta=0)
    assert DPOConfig(beta=0.3).beta == 0.3  # our own beta, not TRL's alias of kl_coeff


# ---------------------------------------------------------------------- the data
def test_pairs_round_trip_through_jsonl_and_load_from_dataset_rows(tmp_path):
    path = save_preference_pairs(PAIRS, tmp_path / "pairs.jsonl")
    assert load_preference_pairs(path) == PAIRS
    assert load_preference_pairs(str(path)) == PAIRS
    datasets = pytest.importorskip("datasets")
    rows = datasets.Dataset.from_list([{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected, "id": k}
                                       for k, p in enumerate(PAIRS)])
    assert load_preference_pairs(rows) == PAIRS  # extra columns are ignored


@pytest.mark.parametrize("line, problem", [
    ('{"prompt": "q", "chosen": "a"}', "missing field(s) rejected"),
    ("{not json", "not valid JSON (Expecting property name enclosed in double quotes)"),
    ('{"prompt": "q", "chosen": "a", "rejected": "a"}', "PreferencePair: chosen and rejected are the same text ('a')"),
    ('{"prompt": "q", "chosen": 3, "rejected": "a"}', "PreferencePair.chosen must be a string, got int"),
    ('{"prompt": "q", "chosen": [{"role": "assistant", "content": "a"}], "rejected": "b"}',
     '"chosen" is a list (conversational rows); give it as text'),
    ('["q", "a", "b"]', "expected an object with fields prompt, chosen, rejected, got list"),
])
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, line, problem):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"prompt": "q", "chosen": "a", "rejected": "b"}\n\n' + line + "\n")
    with pytest.raises(ValueError) as info:
        load_preference_pairs(path)
    assert str(info.value) == f"{path}:3: {problem}"


def test_missing_or_empty_sources_are_one_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="^no preference data file at .*missing.jsonl$"):
        load_preference_pairs(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match=r"empty.jsonl: no preference pairs$"):
        load_preference_pairs(tmp_path / "empty.jsonl")
    with pytest.raises(ValueError, match=r"^list row 1: missing field\(s\) prompt$"):
        load_preference_pairs([{"prompt": "q", "chosen": "a", "rejected": "b"}, {"chosen": "a", "rejected": "b"}])
