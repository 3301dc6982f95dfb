"""The model input for an environment observation: the one place observations become prompt token ids, and
the one rule for the id that pads token rows (`pad_id`).

An observation is text, or a chat-format prompt: a list of {"role", "content"} messages (TRL's
conversational prompts), rendered with the tokenizer's chat template.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from lmgym.core.chat import check_chat_prompt

Observation = str | Sequence[Mapping[str, str]]


def prompt_ids(tokenizer, observation: Observation, system_prompt: str | None, use_chat_template: bool) -> list[int]:
    """Token ids of the full model input for `observation`.

    Text with `use_chat_template`: the observation is a user turn (after a system turn when `system_prompt`
    is set) and the assistant turn is opened; text without it: the raw text is tokenized (with the
    tokenizer's special tokens, e.g. a BOS). Messages: rendered with the chat template as they are, after a
    system turn of `system_prompt` when set and the messages hold none; the assistant turn is opened, or,
    when the last message is the assistant's, continued. Messages need a chat template (ValueError, one line).
    The caller decides whether the tokenizer has a template to use.
    """
    if isinstance(observation, str):
        if not use_chat_template:
            return tokenizer(observation)["input_ids"]
        messages = [{"role": "user", "content": observation}]
    else:
        messages = check_chat_prompt(observation)
        if not use_chat_template:
            raise ValueError("a chat-format prompt (a list of messages) needs the tokenizer's chat template; this "
                             "policy has none (use_chat_template=False, or the tokenizer has no chat_template)")
    if system_prompt and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": system_prompt})
    continues = messages[-1]["role"] == "assistant"
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=not continues,
                                         continue_final_message=continues, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def pad_id(tokenizer) -> int:
    """The id that pads token rows: the tokenizer's pad token, or its EOS token when it has none (as
    transformers' `generate` does); a one-line ValueError when it has neither."""
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    raise ValueError("the tokenizer has neither a pad nor an EOS token: set tokenizer.pad_token (or eos_token)")


def is_observation(prompt: object) -> bool:
    """Whether a prompt given to `sample` is an observation (text or chat messages) rather than token ids.
    One isinstance check (and, for a list, one on its first item): cheap enough for the sampling path."""
    return isinstance(prompt, str) or (isinstance(prompt, (list, tuple)) and len(prompt) > 0
                                       and isinstance(prompt[0], Mapping))
