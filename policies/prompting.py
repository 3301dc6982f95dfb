"""The model input for an environment observation: the one place observations become prompt token ids."""
from __future__ import annotations


def prompt_ids(tokenizer, observation: str, system_prompt: str | None, use_chat_template: bool) -> list[int]:
    """Token ids of the full model input for `observation`.

    With `use_chat_template`, the observation is a user turn (after a system turn when `system_prompt` is
    set) and the assistant turn is opened; otherwise the raw text is tokenized (with the tokenizer's
    special tokens, e.g. a BOS). The caller decides whether the tokenizer has a template to use.
    """
    if not use_chat_template:
        return tokenizer(observation)["input_ids"]
    messages = [{"role": "user", "content": observation}]
    if system_prompt:
        messages.insert(0, {"role": "system", "content": system_prompt})
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]
