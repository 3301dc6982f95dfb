"""Off-policy reuse of earlier iterations' episodes, kept in the replay buffer (`replay_iterations`).

A reused episode keeps what its own iteration computed (reference log-probs, advantages, PPO's old
values): only the policy moved since, and its recorded behaviour log-probs make the importance ratio
pi_now / pi_behaviour. The clipped losses (PPO, GRPO and its variants) already use that ratio;
REINFORCE-stable weighs a replayed episode's tokens by it, truncated (`truncated_importance_weights`).
"""
from __future__ import annotations

import torch

from lmgym.buffers import ADVANTAGES, ReplayBuffer, Trajectory

RATIO_CAP = 1.0  # truncation of replayed tokens' importance weights (IMPALA's rho-bar; bounds their variance)


def replayed(buffer: ReplayBuffer, iteration: int, iterations: int) -> list[Trajectory]:
    """The trained-on episodes of the `iterations` iterations before `iteration` (none when 0)."""
    if iterations <= 0:
        return []
    return [t for t in buffer.recent(iterations, before=iteration) if ADVANTAGES.has(t)]


def remember(buffer: ReplayBuffer, trajectories: list[Trajectory], iteration: int, iterations: int) -> None:
    """Put this iteration's episodes in the buffer; without replay it holds this iteration's only (what a
    checkpoint saves), with replay it keeps the last `iterations` iterations before this one too."""
    if iterations <= 0:
        buffer.clear()
    else:
        kept = buffer.recent(iterations, before=iteration)
        buffer.clear()
        buffer.extend(kept)
    buffer.extend(trajectories)


def check_capacity(buffer: ReplayBuffer, batch_size: int, iterations: int) -> None:
    """A one-line ValueError when the buffer cannot hold `iterations + 1` iterations of `batch_size`."""
    needed = (iterations + 1) * batch_size
    if iterations > 0 and buffer.capacity < needed:
        raise ValueError(f"replay_iterations={iterations} keeps {iterations + 1} iterations of {batch_size} episodes "
                         f"({needed}); the replay buffer holds {buffer.capacity}: pass a larger ReplayBuffer")


def truncated_importance_weights(logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, replayed_rows: torch.Tensor,
                                 cap: float = RATIO_CAP) -> torch.Tensor:
    """[B, C] weights, no gradient: min(pi / pi_behaviour, cap) on the rows of replayed episodes, 1 elsewhere
    (fresh episodes are on-policy: their first-epoch ratio is 1 up to numerics, and it is left out)."""
    ratio = torch.exp(logprobs.detach() - behaviour_logprobs).clamp(max=cap)
    return torch.where(replayed_rows[:, None], ratio, torch.ones_like(ratio))
