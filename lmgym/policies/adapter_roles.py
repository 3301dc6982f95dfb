"""Several roles from ONE model: each role is a LoRA adapter of the same `HFPolicy`, switched on while it acts.

    policy = HFPolicy(model, lora=LoraSettings())           # adapter "default"
    add_adapter(policy, "checker", LoraSettings())          # a second adapter over the same base weights
    roles = {"proposer": AdapterRole(policy, "default"), "checker": AdapterRole(policy, "checker")}
    EpisodeEngine(env, roles)                               # the env's current_role picks the adapter

The base weights are in memory once. A role samples with the plain decoder: a CUDA graph captured while one
adapter was active would keep computing with it (peft picks the adapter in Python, outside the graph).
"""
from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from lmgym.policies.base import Policy
from lmgym.policies.decoding.generation import Generation, StopLists
from lmgym.policies.hf import HFPolicy, LoraSettings
from lmgym.policies.loading.lora_config import peft_lora_config
from lmgym.policies.prompting import Observation

if TYPE_CHECKING:
    from peft import LoraConfig


def add_adapter(policy: HFPolicy, name: str, lora: LoraSettings | LoraConfig | None = None) -> None:
    """Give a LoRA policy another adapter `name` (peft's `add_adapter`), initialised as peft does (B = 0: the
    new adapter starts as the base model), from `lora`: LoraSettings or a peft LoraConfig. The active adapter
    is unchanged."""
    if not policy.is_lora:
        raise ValueError("add_adapter: the policy has no LoRA adapters; "
                         "build it with HFPolicy(..., lora=LoraSettings())")
    if name in policy.model.peft_config:
        raise ValueError(f"add_adapter: the policy already has an adapter named {name!r}")
    policy.model.add_adapter(name, peft_lora_config(lora or LoraSettings(), "add_adapter"))


class AdapterRole(Policy):
    """`policy` with its adapter `adapter` active while this role samples or scores (then the previous one again)."""

    def __init__(self, policy: HFPolicy, adapter: str):
        names = list(getattr(policy.model, "peft_config", {}) or {})
        if adapter not in names:
            raise ValueError(f"AdapterRole: the policy has no adapter {adapter!r} "
                             f"(it has: {', '.join(names) or 'none'})")
        self.policy, self.adapter = policy, adapter
        self.tokenizer = policy.tokenizer
        self.use_chat_template = policy.use_chat_template
        self.system_prompt, self.name_or_path = policy.system_prompt, policy.name_or_path
        self.device = policy.device

    @property
    def on_tokens(self):
        """The shared policy's progress hook (it does this role's sampling)."""
        return self.policy.on_tokens

    @on_tokens.setter
    def on_tokens(self, hook) -> None:
        self.policy.on_tokens = hook

    @contextmanager
    def active(self):
        """This role's adapter on, and the sampler that honours it (the plain decoder)."""
        model = self.policy.model
        previous = model.active_adapter
        model.set_adapter(self.adapter)
        try:
            with self.policy.plain_decoding():
                yield
        finally:
            model.set_adapter(previous)

    def format_prompt(self, observation: Observation) -> list[int]:
        return self.policy.format_prompt(observation)

    def sample(self, prompts: list[list[int]], n: int = 1, max_new_tokens: int = 256, temperature: float = 1.0,
               top_p: float = 1.0, stop: StopLists = None, generator=None) -> list[list[Generation]]:
        with self.active():
            return self.policy.sample(prompts, n, max_new_tokens, temperature, top_p, stop, generator)

    def token_logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       completion_start: int | torch.Tensor, temperature: float = 1.0
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        with self.active():
            return self.policy.token_logprobs(input_ids, attention_mask, completion_start, temperature)

    def encode_turn(self, text: str, role: str, after: Sequence[int] = ()) -> list[int]:
        return self.policy.encode_turn(text, role, after)
