"""Collating trajectories into padded tensors for the training pass."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from buffers.trajectory import Trajectory


@dataclass
class Batch:
    """Tensors for one micro-batch. Each row is prompt + completion followed by padding (right-padded, so
    no query position is fully masked: left padding makes the attention backward produce NaN in bf16);
    completion_positions[b, t] is the column of row b's t-th completion token, and every [B, C] tensor is
    indexed by t."""

    input_ids: torch.Tensor             # [B, L]
    attention_mask: torch.Tensor        # [B, L]
    completion_positions: torch.Tensor  # [B, C] long (padding entries point at a valid column; masked anyway)
    loss_mask: torch.Tensor        # [B, C] float, 1 where the model sampled the token
    old_logprobs: torch.Tensor     # [B, C] behaviour log-probs
    token_rewards: torch.Tensor    # [B, C] step rewards placed at each step's last token
    rewards: torch.Tensor          # [B] episode rewards
    group_ids: torch.Tensor        # [B]
    ref_logprobs: torch.Tensor | None = None   # [B, C]
    advantages: torch.Tensor | None = None     # [B, C]
    extras: dict | None = None                 # name -> [B, C], the per-token `token_fields` of collate

    @property
    def size(self) -> int:
        return self.input_ids.shape[0]

    def to(self, device: torch.device) -> "Batch":
        moved = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in self.__dict__.items()}
        if self.extras is not None:
            moved["extras"] = {k: v.to(device) for k, v in self.extras.items()}
        return Batch(**moved)


def collate(trajectories: list[Trajectory], pad_id: int, device: torch.device | str = "cpu",
            token_fields: tuple[str, ...] = ()) -> Batch:
    """Pad a list of trajectories into a Batch (stored tensors like ref log-probs/advantages included).

    `token_fields`: names of per-token lists in `info` (e.g. PPO's "old_values") collated into
    `batch.extras` when every trajectory has them. A per-token KL penalty (`info["kl_token_penalty"]`,
    KL in the reward) is subtracted from `token_rewards`.
    """
    if not trajectories:
        raise ValueError("collate: empty list of trajectories")
    C = max(max(len(t.completion_ids) for t in trajectories), 1)
    L = max(len(t.prompt_ids) + max(len(t.completion_ids), 1) for t in trajectories)
    B = len(trajectories)
    ids = torch.full((B, L), pad_id, dtype=torch.long)
    attn = torch.zeros((B, L), dtype=torch.long)
    positions = torch.zeros((B, C), dtype=torch.long)
    loss_mask = torch.zeros((B, C))
    old_lp = torch.zeros((B, C))
    token_rewards = torch.zeros((B, C))
    has_ref = all("ref_logprobs" in t.info for t in trajectories)
    has_adv = all("advantages" in t.info for t in trajectories)
    ref = torch.zeros((B, C)) if has_ref else None
    adv = torch.zeros((B, C)) if has_adv else None
    extras = {name: torch.zeros((B, C)) for name in token_fields if all(name in t.info for t in trajectories)}
    for i, t in enumerate(trajectories):
        p, c = len(t.prompt_ids), len(t.completion_ids)
        ids[i, :p] = torch.tensor(t.prompt_ids, dtype=torch.long)
        attn[i, :p + c] = 1
        positions[i] = (p + torch.arange(C)).clamp(max=L - 1)
        if c:
            ids[i, p:p + c] = torch.tensor(t.completion_ids, dtype=torch.long)
            loss_mask[i, :c] = torch.tensor(t.completion_mask, dtype=torch.float)
            old_lp[i, :c] = torch.tensor(t.logprobs)
            for end, r in zip(t.step_ends, t.step_rewards):
                token_rewards[i, end] += r
            if has_ref:
                ref[i, :c] = torch.tensor(t.info["ref_logprobs"])
            if has_adv:
                adv[i, :c] = torch.tensor(t.info["advantages"])
            if "kl_token_penalty" in t.info:
                token_rewards[i, :c] -= torch.tensor(t.info["kl_token_penalty"])
            for name, tensor in extras.items():
                tensor[i, :c] = torch.tensor(t.info[name])
    return Batch(
        input_ids=ids, attention_mask=attn, completion_positions=positions, loss_mask=loss_mask, old_logprobs=old_lp,
        token_rewards=token_rewards, rewards=torch.tensor([float(t.reward) for t in trajectories]),
        group_ids=torch.tensor([t.group_id for t in trajectories]), ref_logprobs=ref, advantages=adv,
        extras=extras or None,
    ).to(torch.device(device))
