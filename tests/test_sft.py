"""SFT: the prompt is masked, packed rows never attend across examples, the tiny model learns, resume is
exact, and bad data is one line."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from lmgym.algorithms import SFT, SFTConfig
from lmgym.algorithms.sft_tokens import collate_rows, encode_example, pack, packed_token_logprobs
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.traindata import ChatExample, SFTExample, arithmetic_sft_examples, gsm8k_sft_examples, load_sft_examples
from tests.tiers import slow
from tests.tiny_models import save_tiny_model_dir

ROOT = Path(__file__).resolve().parents[1]
PAIRS = [SFTExample(f"What is {a} + {b}?", f"{a} + {b} = {a + b}\n#### {a + b}") for a, b in
         [(12, 7), (3, 45), (60, 21), (8, 8), (33, 14), (5, 70), (41, 2), (19, 19), (26, 30), (7, 62)]]
HELD_OUT = [SFTExample(f"What is {a} + {b}?", f"{a} + {b} = {a + b}\n#### {a + b}") for a, b in [(15, 4), (22, 31)]]
CHAT = ChatExample(({"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}))


def tiny(attn: str = "sdpa") -> HFPolicy:
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=0)
    model.config._attn_implementation = attn
    return HFPolicy(model, tok, device="cpu")


def config(run_dir, iterations: int, **fields) -> SFTConfig:
    values = dict(train_iterations=iterations, examples_per_iteration=4, max_length=120, micro_batch_size=2,
                  learning_rate=3e-3, eval_every=2, save_every=1, progress=False, output_dir=str(run_dir))
    return SFTConfig(**{**values, **fields})


# ---------------------------------------------------------------- masking
def test_the_prompt_is_masked_and_the_completion_and_eos_are_trained(tiny_policy):
    example = SFTExample("What is 2 + 3?", "2 + 3 = 5\n#### 5")
    encoded = encode_example(tiny_policy, example)
    prompt = tiny_policy.format_prompt(example.prompt)
    assert encoded.ids[:len(prompt)] == prompt
    assert encoded.weights == [0] * len(prompt) + [1] * (len(encoded.ids) - len(prompt))
    trained = [t for t, w in zip(encoded.ids, encoded.weights) if w]
    assert tiny_policy.tokenizer.decode(trained) == "2 + 3 = 5\n#### 5<|im_end|>"

    everything = encode_example(tiny_policy, example, completion_only=False)
    assert everything.ids == encoded.ids and everything.weights == [0] + [1] * (len(encoded.ids) - 1)


def test_a_chat_example_trains_on_its_assistant_turns_only(tiny_policy):
    encoded = encode_example(tiny_policy, CHAT)
    decode = tiny_policy.tokenizer.decode
    assert decode(encoded.ids) == ("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n"
                                   "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n")
    assert decode([t for t, w in zip(encoded.ids, encoded.weights) if w]) == "hello<|im_end|>4<|im_end|>"
    # TRL's conversational prompt/completion row: only the completion's assistant turn
    row = {"prompt": list(CHAT.messages[:3]), "completion": [CHAT.messages[3]]}
    (example,) = load_sft_examples([row])
    kept = encode_example(tiny_policy, example)
    assert kept.ids == encoded.ids
    assert decode([t for t, w in zip(kept.ids, kept.weights) if w]) == "4<|im_end|>"


# ---------------------------------------------------------------- packing
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_packed_row_scores_each_example_as_if_it_were_alone(attn):
    policy = tiny(attn)
    examples = [encode_example(policy, e) for e in (PAIRS[0], CHAT, PAIRS[1], SFTExample("x", "y"))]
    with torch.no_grad():
        row = collate_rows([examples], policy.tokenizer.pad_token_id)
        packed = packed_token_logprobs(policy, row.input_ids, row.position_ids)[0]
        start = 0
        for example in examples:
            alone = collate_rows([[example]], policy.tokenizer.pad_token_id)
            expected = packed_token_logprobs(policy, alone.input_ids, alone.position_ids)[0]
            assert torch.allclose(packed[start:start + len(example.ids) - 1], expected, atol=1e-5)
            start += len(example.ids)
        # the same row with positions running on (attention crossing examples) scores them differently
        crossing = packed_token_logprobs(policy, row.input_ids, torch.arange(row.input_ids.shape[1])[None])[0]
    assert (crossing - packed).abs().max() > 1e-2


def test_packing_fills_rows_first_fit_decreasing_within_max_length(tiny_policy):
    examples = [encode_example(tiny_policy, e) for e in PAIRS]
    rows = pack(examples, 120)
    assert all(sum(len(e.ids) for e in row) <= 120 for row in rows)
    assert sorted(id(e) for row in rows for e in row) == sorted(id(e) for e in examples)
    assert len(rows) == 5  # 10 examples of 52-56 tokens: two a row
    batch = collate_rows(rows, tiny_policy.tokenizer.pad_token_id)
    assert batch.weights.sum() == sum(e.tokens for e in examples)
    assert batch.position_ids[0].tolist()[:3] == [0, 1, 2] and batch.position_ids[0, len(rows[0][0].ids)] == 0


def test_the_optimizer_step_is_the_same_packed_or_not(tmp_path):
    stats, grads = {}, {}
    for packing in (True, False):
        sft = SFT(tiny(), PAIRS, config(tmp_path / str(packing), 1, packing=packing, examples_per_iteration=10))
        stats[packing] = sft.run_iteration()
        grads[packing] = [p.grad.clone() for p in sft.policy.parameters()]
    assert stats[True]["rows"] == 5 and stats[False]["rows"] == 10
    assert stats[True]["loss"] == pytest.approx(stats[False]["loss"], abs=1e-5)
    assert stats[True]["tokens"] == stats[False]["tokens"] == sum(len(e.completion) + 1 for e in PAIRS)  # + EOS
    for a, b in zip(grads[True], grads[False]):
        assert torch.allclose(a, b, atol=1e-5)


# ---------------------------------------------------------------- training
@slow
def test_sft_lowers_held_out_loss_and_resumes_exactly(tmp_path, capsys):
    whole = SFT(tiny(), PAIRS, config(tmp_path / "whole", 6), held_out=HELD_OUT)
    rows = whole.train()
    evals = [r["eval_loss"] for r in rows if "eval_loss" in r]
    assert [r["iteration"] for r in rows if "eval_loss" in r] == [0, 2, 4, 6]
    assert evals[-1] < evals[0] - 0.5, evals  # the held-out sums' completions get likelier
    assert rows[1]["tokens"] > 0 and rows[-1]["epoch"] == pytest.approx(2.4)

    assert SFT(tiny(), PAIRS, config(tmp_path / "split", 3), held_out=HELD_OUT).train()[-1]["iteration"] == 3
    resumed = SFT(tiny(), PAIRS, config(tmp_path / "split", 6), held_out=HELD_OUT)
    again = resumed.train(resume=True)
    assert "(iteration 3)" in capsys.readouterr().out
    for mine, theirs in zip(again, rows):
        for key in ("loss", "grad_norm", "tokens", "eval_loss"):
            if key in theirs:
                assert mine[key] == pytest.approx(theirs[key], abs=1e-5), (mine["iteration"], key)
    for a, b in zip(resumed.policy.parameters(), whole.policy.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    saved = json.loads((tmp_path / "split" / "config.json").read_text())
    assert saved["algorithm"] == "SFT" and saved["train_examples"] == 10 and saved["packing"] is True


def test_long_examples_are_cut_and_those_with_nothing_to_train_are_left_out(tiny_policy, tmp_path):
    long = SFTExample("What is " + "1 + " * 30 + "1?", "31")
    sft = SFT(tiny_policy, PAIRS[:3] + [long], config(tmp_path, 1, max_length=53))  # PAIRS: 54, 54, 56 tokens
    assert len(sft.examples) == 3 and sft.cut == 3 and [len(e.ids) for e in sft.examples] == [53] * 3
    assert sft.examples[0].weights[-1] == 1  # the completion is cut, not dropped
    with pytest.raises(ValueError, match="SFT: no training examples: train_examples holds 1, none with a trained "
                                         "token within max_length=53"):
        SFT(tiny_policy, [long], config(tmp_path, 1, max_length=53))


def test_sft_of_a_lora_policy_trains_the_adapter_alone(tmp_path):
    from lmgym.policies import LoraSettings

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu",
                      lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    rows = SFT(policy, PAIRS, config(tmp_path, 2, eval_every=0, save_every=0), held_out=HELD_OUT).train()
    after = policy.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all("lora_" in k for k in changed)
    assert rows[-1]["eval_loss"] < rows[0]["eval_loss"]


# ---------------------------------------------------------------- data
def test_sft_data_from_jsonl_and_datasets(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps({"prompt": "p", "completion": "c"}) + "\n\n" +
                    json.dumps({"messages": list(CHAT.messages)}) + "\n")
    assert load_sft_examples(path) == [SFTExample("p", "c"), CHAT]
    assert load_sft_examples(str(path), limit=1) == [SFTExample("p", "c")]
    import datasets

    folder = tmp_path / "saved"
    datasets.Dataset.from_list([{"prompt": "a", "completion": "b"}, {"prompt": "c", "completion": "d"}]).save_to_disk(
        str(folder))
    assert load_sft_examples(folder) == [SFTExample("a", "b"), SFTExample("c", "d")]


@slow
def test_gsm8k_and_arithmetic_gold_solutions_complete_the_envs_prompts(gsm8k_train):
    from lmgym.envs import make

    examples = gsm8k_sft_examples(gsm8k_train, (0, 3))
    assert examples[0].prompt == make("GSM8K-v0", data_path=gsm8k_train).reset(options={"index": 0})[0]
    assert examples[0].completion == ("Natalia sold 48/2 = 24 clips in May.\n"
                                      "Natalia sold 48+24 = 72 clips altogether in April and May.\n#### 72")
    stepwise = gsm8k_sft_examples(gsm8k_train, (0, 1), mode="stepwise")[0]
    assert stepwise.prompt.endswith("\n") and stepwise.completion == examples[0].completion + "\n"

    arithmetic = arithmetic_sft_examples(3, "test", n=4, seed=1)
    assert arithmetic == arithmetic_sft_examples(3, "test", n=4, seed=1) != arithmetic_sft_examples(3, "test", 4, 2)
    env = make("Arithmetic-v0", level=3, split="test")
    first = arithmetic_sft_examples(3, "test")[0]
    observation, info = env.reset(options={"index": 0})
    assert first.prompt == observation and first.completion.endswith(f"#### {info['gold']}")
    assert len(first.completion.splitlines()) == 3 and env.step(first.completion)[1] == 1.0


def test_bad_data_is_one_line(tmp_path, tiny_policy):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"prompt": "p", "completion": "c"}) + "\n" + json.dumps({"prompt": "p"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: expected 'prompt' and 'completion' fields or "
                                         r"'messages', got fields \['prompt'\]$"):
        load_sft_examples(path)
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    with pytest.raises(ValueError, match=":1: the conversation has no assistant turn to train on$"):
        load_sft_examples(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match=r":1: not valid JSON \("):
        load_sft_examples(path)
    with pytest.raises(ValueError, match="SFT data file not found: .*missing.jsonl$"):
        load_sft_examples(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match=r"^SFT: train_examples\[1\]: expected an SFTExample, a ChatExample or a "
                                         r"list of messages, got dict$"):
        SFT(tiny_policy, [PAIRS[0], {"prompt": "p"}], config(tmp_path / "run", 1))
    raw = HFPolicy(tiny_policy.model, tiny_policy.tokenizer, use_chat_template=False, device="cpu")
    with pytest.raises(ValueError, match=r"held_out\[0\]: a chat example needs a policy that uses a chat template"):
        SFT(raw, PAIRS, config(tmp_path / "run", 1), held_out=[CHAT])
    with pytest.raises(ValueError, match="SFTConfig.max_length must be a positive integer, got 0"):
        config(tmp_path / "run", 1, max_length=0)


# ---------------------------------------------------------------- the example script
@slow
@pytest.mark.plots  # reads the run's PNGs (tests/conftest.py)
def test_the_example_script_trains_saves_and_reports_held_out_loss(tmp_path_factory, tmp_path, capsys):
    model_dir = save_tiny_model_dir(tmp_path_factory, build_tiny_model)
    spec = importlib.util.spec_from_file_location("sft_example", ROOT / "examples" / "sft.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    run = tmp_path / "run"
    script.main(["--preset", "cpu", "--model", model_dir, "--data", "arithmetic", "--level", "1",
                 "--train_examples", "12", "--held_out_examples", "4", "--train_iterations", "2",
                 "--examples_per_iteration", "4", "--no-progress", "--output_dir", str(run)])
    out = capsys.readouterr().out
    assert "12 training examples, 4 held out" in out
    assert "held-out loss per completion token: " in out and "(iteration 0) -> " in out
    assert (run / "model" / "config.json").is_file() and (run / "metrics.png").is_file()
    with pytest.raises(SystemExit, match="error: --held_out_examples must be >= 1, got 0"):
        script.main(["--model", model_dir, "--held_out_examples", "0", "--output_dir", str(run)])
