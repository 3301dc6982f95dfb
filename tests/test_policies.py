import pytest
import torch

from lmgym.policies import HFPolicy, LoraSettings, ModelNotFoundError, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding.generation import filter_top_p, sample_tokens


def test_format_prompt_uses_chat_template_and_system_prompt():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok), tok, system_prompt="Be brief.", device="cpu")
    text = tok.decode(policy.format_prompt("What is 2 + 3?"))
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n"
                    "<|im_start|>assistant\n")


def test_sample_returns_n_generations_with_logprobs_and_left_padding_is_harmless(tiny_policy):
    short, long = tiny_policy.format_prompt("a"), tiny_policy.format_prompt("a much longer prompt here")
    together = tiny_policy.sample([short, long], n=3, max_new_tokens=10, temperature=0.0)
    alone = tiny_policy.sample([short], n=1, max_new_tokens=10, temperature=0.0)
    assert [len(g) for g in together] == [3, 3]
    assert together[0][0].completion_ids == alone[0][0].completion_ids  # padding does not change the output
    g = together[1][0]
    assert len(g.logprobs) == len(g.completion_ids) and all(lp <= 0 for lp in g.logprobs)
    assert g.text == tiny_policy.tokenizer.decode(g.completion_ids, skip_special_tokens=True)


def test_stop_strings_end_generation(tiny_policy):
    prompt = tiny_policy.format_prompt("hello")
    free = tiny_policy.sample([prompt], 1, 30, temperature=0.0)[0][0]
    stop_char = free.text[3]
    stopped = tiny_policy.sample([prompt], 1, 30, temperature=0.0, stop=[stop_char])[0][0]
    assert stopped.finish_reason == "stop" and stopped.text.endswith(stop_char)
    assert stop_char not in stopped.text[:-1]


def test_sampling_is_seeded(tiny_policy):
    prompt = tiny_policy.format_prompt("hi")
    a = tiny_policy.sample([prompt], 4, 8, generator=torch.Generator().manual_seed(5))
    b = tiny_policy.sample([prompt], 4, 8, generator=torch.Generator().manual_seed(5))
    assert [g.completion_ids for g in a[0]] == [g.completion_ids for g in b[0]]


def test_top_p_keeps_the_nucleus_only():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = filter_top_p(logits, 0.7)
    assert torch.isfinite(kept).tolist() == [[True, True, False, False]]
    tokens, _ = sample_tokens(logits.repeat(200, 1), 1.0, 0.7, torch.Generator().manual_seed(0))
    assert set(tokens.tolist()) == {0, 1}


def test_lora_policy_trains_adapters_only():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok), tok, device="cpu", lora=LoraSettings(r=4, alpha=8))
    names = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    ref = policy.frozen_copy()
    assert ref.model is policy.model  # the reference is the adapter-free base, not a second copy


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(ModelNotFoundError) as err:
        HFPolicy(str(tmp_path / "no-such-model"), device="cpu")
    assert "no-such-model" in str(err.value) and "\n" not in str(err.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        HFPolicy(str(tmp_path / "empty"), device="cpu")


def test_frozen_copy_samples_with_its_own_weights():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok), tok, device="cpu", fast_decode=True)
    ref = policy.frozen_copy()
    assert ref.fast_decoder is None and ref.model is not policy.model
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(torch.randn_like(p))  # the policy moves; the reference must not
    prompt = ref.format_prompt("hi")
    before = ref.sample([prompt], 1, 8, temperature=0.0)[0][0].completion_ids
    fresh = HFPolicy(build_tiny_model(tok), tok, device="cpu").sample([prompt], 1, 8, temperature=0.0)[0][0]
    assert before == fresh.completion_ids


def test_sample_takes_a_stop_list_per_prompt_for_all_n_samples(tiny_policy):
    prompts = [tiny_policy.format_prompt("hello"), tiny_policy.format_prompt("other")]
    free = tiny_policy.sample(prompts, 1, 30, temperature=0.0)
    stops = [[free[0][0].text[2]], [free[1][0].text[4]]]
    each = tiny_policy.sample(prompts, 2, 30, temperature=0.0, stop=stops)
    for i, own in enumerate(stops):
        assert [g.text for g in each[i]] == [free[i][0].text[:free[i][0].text.index(own[0]) + 1]] * 2
        assert all(g.finish_reason == "stop" for g in each[i])
