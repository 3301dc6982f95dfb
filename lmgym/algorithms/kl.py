"""KL estimators between the policy and the reference, per token (Schulman, "Approximating KL"), and the
KL paid in the reward (`pay_kl_in_reward`)."""
from __future__ import annotations

import torch

from lmgym.buffers import REF_LOGPROBS, Trajectory


def kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = log p - log q: unbiased, high variance, can be negative."""
    return logp - ref_logp


def kl_k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 = (log p - log q)^2 / 2: biased, low variance, non-negative."""
    return 0.5 * (logp - ref_logp) ** 2


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = q/p - 1 - log(q/p): unbiased, non-negative (GRPO's choice)."""
    log_ratio = (ref_logp - logp).clamp(-20.0, 20.0)
    return torch.exp(log_ratio) - 1.0 - log_ratio


KL_ESTIMATORS = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL(policy || reference) estimate with the named estimator."""
    try:
        return KL_ESTIMATORS[estimator](logp, ref_logp)
    except KeyError:
        raise ValueError(f"unknown KL estimator {estimator!r}; choose from {', '.join(KL_ESTIMATORS)}") from None


def pay_kl_in_reward(trajectories: list[Trajectory], kl_coeff: float, per_token: bool) -> None:
    """Subtract kl_coeff * k1 from each trajectory's reward (shaping "kl_penalty"): at each token
    (`per_token`) or summed at the last step. Reads each trajectory's REF_LOGPROBS."""
    for t in trajectories:
        kl = [kl_coeff * m * (lp - r) for m, lp, r in zip(t.completion_mask, t.logprobs, REF_LOGPROBS.get(t))]
        t.add_shaping("kl_penalty", -sum(kl), [-k for k in kl] if per_token else None)
