"""Collating trajectories into padded tensors for the training pass."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from lmgym.buffers.fields import ADVANTAGES, REF_LOGPROBS, TOKEN_REWARD_SHAPING, TokenField
from lmgym.buffers.trajectory import Trajectory


@dataclass
class Batch:
    """Tensors for one micro-batch. Each row is prompt + completion followed by padding (right-padded, so
    no query position is fully masked: left padding makes the attention backward produce NaN in bf16);
    completion_positions[b, t] is the column of row b's t-th completion token, and every [B, C] tensor is
    indexed by t. `fields` holds the collated per-token fields by name; read one with `batch[FIELD]`."""

    input_ids: torch.Tensor             # [B, L]
    attention_mask: torch.Tensor        # [B, L]
    completion_positions: torch.Tensor  # [B, C] long (padding entries point at a valid column; masked anyway)
    loss_mask: torch.Tensor        # [B, C] float, 1 where the model sampled the token
    old_logprobs: torch.Tensor     # [B, C] behaviour log-probs
    token_rewards: torch.Tensor    # [B, C] step rewards placed at each step's last token, plus per-token shaping
    rewards: torch.Tensor          # [B] episode rewards
    group_ids: torch.Tensor        # [B]
    iterations: torch.Tensor       # [B] the training iteration that sampled each row (older: replayed)
    fields: dict[str, torch.Tensor] = field(default_factory=dict)  # TokenField name -> [B, C]

    def __getitem__(self, token_field: TokenField) -> torch.Tensor:
        """The [B, C] tensor of a collated per-token field; KeyError (one line) when it was not collated."""
        if token_field.name not in self.fields:
            raise KeyError(f"the batch has no per-token field {token_field.name!r} (collated: "
                           f"{', '.join(sorted(self.fields)) or 'none'}); collate puts in the fields it is given, "
                           f"when every trajectory has them")
        return self.fields[token_field.name]

    @property
    def ref_logprobs(self) -> torch.Tensor | None:
        """[B, C] reference log-probs, when every trajectory has them."""
        return self.fields.get(REF_LOGPROBS.name)

    @property
    def advantages(self) -> torch.Tensor | None:
        """[B, C] advantages, when every trajectory has them."""
        return self.fields.get(ADVANTAGES.name)

    @property
    def size(self) -> int:
        return self.input_ids.shape[0]

    def to(self, device: torch.device) -> Batch:
        """The batch on `device`, each tensor moved by `copy_to` (no stream sync to CUDA)."""
        moved = {k: copy_to(v, device) for k, v in self.__dict__.items() if k != "fields"}
        return Batch(**moved, fields={k: copy_to(v, device) for k, v in self.fields.items()})


def copy_to(tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """`tensor` (on the host, not changed afterwards) on `device`. To CUDA the copy goes from pinned memory without
    waiting: a plain copy from pageable memory synchronises the stream, so the host would wait for every kernel
    queued before it (each micro-batch for the GPU to drain; a decode sync for every step in flight)."""
    if torch.device(device).type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def collate(trajectories: list[Trajectory], pad_id: int, device: torch.device | str = "cpu",
            fields: tuple[TokenField, ...] = ()) -> Batch:
    """Pad a list of trajectories into a Batch.

    REF_LOGPROBS, ADVANTAGES and the declared `fields` (e.g. PPO's OLD_VALUES) go into `batch.fields`
    when every trajectory has them. Per-token reward shaping (TOKEN_REWARD_SHAPING, e.g. KL in the
    reward) is added to `token_rewards`.
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
    wanted = dict.fromkeys((REF_LOGPROBS, ADVANTAGES, *fields))  # ordered, without repeats
    collated = {f: torch.zeros((B, C)) for f in wanted if all(f.has(t) for t in trajectories)}
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
            if TOKEN_REWARD_SHAPING.has(t):
                token_rewards[i, :c] += torch.tensor(TOKEN_REWARD_SHAPING.get(t))
            for f, tensor in collated.items():
                tensor[i, :c] = torch.tensor(f.get(t))
    return Batch(
        input_ids=ids, attention_mask=attn, completion_positions=positions, loss_mask=loss_mask, old_logprobs=old_lp,
        token_rewards=token_rewards, rewards=torch.tensor([float(t.reward) for t in trajectories]),
        group_ids=torch.tensor([t.group_id for t in trajectories]),
        iterations=torch.tensor([t.iteration for t in trajectories]), fields={f.name: v for f, v in collated.items()},
    ).to(torch.device(device))
