"""`HFPolicy.sample` takes text and chat messages as well as token ids (formatted with `format_prompt`)."""
import torch

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?"}]


def sample(policy, prompts, n=2):
    return policy.sample(prompts, n=n, max_new_tokens=5, generator=torch.Generator().manual_seed(7))


def ids_of(groups):
    return [[g.completion_ids for g in group] for group in groups]


def test_text_and_messages_sample_as_their_formatted_ids(tiny_policy):
    text = "What is 2 + 3?"
    by_ids = sample(tiny_policy, [tiny_policy.format_prompt(text), tiny_policy.format_prompt(MESSAGES)])
    by_obs = sample(tiny_policy, [text, MESSAGES])
    assert len(by_obs) == 2 and all(len(group) == 2 for group in by_obs)
    assert ids_of(by_obs) == ids_of(by_ids)
    assert [[g.logprobs for g in group] for group in by_obs] == [[g.logprobs for g in group] for group in by_ids]
    assert all(isinstance(g.text, str) for group in by_obs for g in group)


def test_token_ids_are_not_reformatted(tiny_policy, monkeypatch):
    ids = tiny_policy.format_prompt("What is 2 + 3?")
    calls = []
    monkeypatch.setattr(tiny_policy, "format_prompt", lambda o: calls.append(o) or ids)
    sample(tiny_policy, [ids], n=1)
    assert calls == []


def test_a_bad_message_list_is_one_line(tiny_policy):
    import pytest

    with pytest.raises(ValueError, match="role") as err:
        tiny_policy.sample([[{"role": "robot", "content": "hi"}]], n=1, max_new_tokens=2)
    assert "\n" not in str(err.value)
