"""Losses of a process reward model: Bradley-Terry on step preferences, pointwise BCE on rated steps."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def bradley_terry_loss(chosen_logits: torch.Tensor, rejected_logits: torch.Tensor,
                       margin: torch.Tensor | float | None = None) -> torch.Tensor:
    """Mean over pairs of -log sigmoid(chosen - rejected [- margin]): the negative log-likelihood that each
    chosen step beats its rejected sibling (Bradley-Terry), computed in float32. No pairs is a ValueError."""
    if chosen_logits.shape != rejected_logits.shape:
        raise ValueError(f"bradley_terry_loss: chosen {tuple(chosen_logits.shape)} and rejected "
                         f"{tuple(rejected_logits.shape)} logits differ in shape")
    if chosen_logits.numel() == 0:
        raise ValueError("bradley_terry_loss: no pairs")
    difference = chosen_logits.float() - rejected_logits.float()
    if margin is not None:
        difference = difference - margin
    return -F.logsigmoid(difference).mean()


def pointwise_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy with logits (labels in [0, 1], soft labels allowed), averaged over the entries
    where `mask` is set (the rated steps), in float32. No rated entry is a ValueError."""
    if not (logits.shape == labels.shape == mask.shape):
        raise ValueError(f"pointwise_loss: logits {tuple(logits.shape)}, labels {tuple(labels.shape)} and mask "
                         f"{tuple(mask.shape)} differ in shape")
    rated = mask.bool()
    if not bool(rated.any()):
        raise ValueError("pointwise_loss: no rated steps")
    return F.binary_cross_entropy_with_logits(logits[rated].float(), labels[rated].float())
