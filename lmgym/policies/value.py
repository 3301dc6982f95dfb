"""Value models for PPO: a scalar head on the policy backbone, or a separate critic (backbone + head).

Both give V(s_t) for every completion position t, where s_t is everything before token t: the
hidden state that predicts token t (the same positions the policy's log-probs are read from).
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from lmgym.policies.base import BackbonePolicy
from lmgym.policies.loading.models import load_model_and_tokenizer
from lmgym.policies.logprobs import completion_hidden_states
from lmgym.policies.padded_passes import backbone_hidden, enable_activation_checkpointing


class ValueHead(nn.Module):
    """A scalar linear head on the policy backbone's last hidden state (shares the policy's forward pass).

    Zero-initialised, so V = 0 before training; computed in float32 even under bf16 autocast.
    """

    shares_policy_backbone = True

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [B, C, H] -> values [B, C]."""
        with torch.autocast(hidden.device.type, enabled=False):
            return self.linear(hidden.float()).squeeze(-1)


class CriticModel(nn.Module):
    """A separate causal-LM backbone (no lm-head) with a `ValueHead`: its own forward pass and weights.

    It reads the policy's token ids, so its vocabulary must be the policy's.
    """

    shares_policy_backbone = False

    def __init__(self, backbone: nn.Module, hidden_size: int):
        super().__init__()
        self.backbone = backbone
        self.head = ValueHead(hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_start: int) -> torch.Tensor:
        """Values [B, C] of the states before each completion token."""
        hidden = backbone_hidden(self.backbone, input_ids, attention_mask)
        return self.head(completion_hidden_states(hidden, completion_start))

    def enable_gradient_checkpointing(self) -> None:
        """Checkpoint the backbone's decoder layers in training passes (policies/padded_passes.py)."""
        enable_activation_checkpointing(self.backbone)


def build_value_model(policy: BackbonePolicy, spec: str = "shared") -> nn.Module:
    """`spec`: "shared" (a head on the policy backbone), "copy" (a critic initialised from a copy of the
    policy's backbone), or a model name/path (a critic from that causal LM; same tokenizer required)."""
    backbone, _ = policy.backbone_and_head()
    if spec == "shared":
        return ValueHead(backbone.config.hidden_size).to(policy.device)
    if spec == "copy":
        critic_backbone = copy.deepcopy(backbone)
    else:
        model, tokenizer = load_model_and_tokenizer(spec, device="cpu")
        if tokenizer.get_vocab() != policy.tokenizer.get_vocab():
            raise ValueError(f"critic model {spec!r} has a different tokenizer from the policy; a critic must "
                             "read the policy's token ids (use 'shared', 'copy' or a model of the same family)")
        critic_backbone = model.base_model
    critic_backbone.requires_grad_(True)
    critic_backbone.eval()  # dropout off, as for the policy
    return CriticModel(critic_backbone, critic_backbone.config.hidden_size).to(policy.device)
