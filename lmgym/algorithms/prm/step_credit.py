"""Step-level credit from a verifier: PRM score differences ("progress") as step rewards (`prm_credit="progress"`).

The step reward of step t is the verifier's score after it minus its score before it, s_t - s_{t-1}: how much
the step moved the estimated chance of ending correct. This is the *process advantage* of Setlur et al., 2024
("Rewarding Progress: Scaling Automated Process Verifiers for LLM Reasoning"): A(s, a) = Q(s, a) - V(s), with
the verifier standing in for the value function. It is also potential-based shaping (Ng et al., 1999) with the
score as potential: an episode's summed step rewards telescope to s_T - s_0, so a policy cannot collect
dense reward by writing more steps, the reward hacking that summed absolute scores invite (PURE, Cheng et al.,
2025, "Stop Summation"; the "score" credit of algorithms/prm/reward.py pays every step's absolute score).

**The first step's prior s_0** is the mean of the group's first-step scores: every member of a GRPO group
starts from the same question, so V(question) = E_a[Q(question, a)] is estimated by the G sampled first steps,
on the verifier's own scale (Setlur et al.'s A = Q - V with V as the mean of Q over the policy's actions). A
fixed 0.5 would give every first step a question-difficulty offset that later steps do not have, and the
score of the empty prefix is a point the verifier never saw a label for (its labels start at step 1).

**Normalisation** (GRPO, `progress_advantages`) is DeepSeekMath's process supervision (section 4.1.3): the
step rewards of all members of a group are normalised together, (r - mean) / std (centred only without
`scale_by_std`, Dr. GRPO).

**Per-token advantage**: each token gets the group-normalised outcome advantage (GRPO's, so the outcome
keeps its full weight) plus `prm_weight` times the normalised credit of *its own step*, not the return to go.
The return to go of score differences telescopes to s_T - s_{t-1}, which pays every step again for the final
score (a second, noisier copy of the outcome signal); the step's own credit isolates what that step did,
the form Setlur et al. use (effective reward Q^pi + alpha * A^mu per step). Both terms are unit scale after
normalisation, so `prm_weight` < 1 (checked: <= 1) keeps the outcome dominant; in a group whose outcomes are
all equal (no GRPO signal) the step credit is the only signal, which is the point of a dense reward.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from lmgym.algorithms.advantages import group_advantages, group_step_normalised


def score_progress(scores: Sequence[Sequence[float]], group_ids: Sequence[int]) -> list[list[float]]:
    """Per trajectory, its step scores' differences [s_1 - s_0, s_2 - s_1, ...], s_0 the mean first-step score
    of the trajectories of its group (those with at least one step). A trajectory without steps gets []."""
    if len(scores) != len(group_ids):
        raise ValueError(f"score_progress: {len(scores)} score lists but {len(group_ids)} group ids")
    firsts: dict[int, list[float]] = {}
    for row, gid in zip(scores, group_ids):
        if len(row):
            firsts.setdefault(gid, []).append(float(row[0]))
    out = []
    for row, gid in zip(scores, group_ids):
        row = [float(s) for s in row]
        if not row:
            out.append([])
            continue
        prior = sum(firsts[gid]) / len(firsts[gid])
        out.append([b - a for a, b in zip([prior, *row[:-1]], row)])
    return out


def spread_over_steps(step_values: torch.Tensor, step_mask: torch.Tensor) -> torch.Tensor:
    """[B, C]: every token gets the value held at the last token of its own step (`step_mask` 1 there), i.e. the
    next step end at or after it; tokens after a row's last step end get 0."""
    mask = step_mask > 0
    ends = mask.long()
    step_of = ends.cumsum(1) - ends  # step ends strictly before each token: the index of its step
    count = int(ends.sum(1).max()) if ends.numel() else 0
    by_step = torch.zeros(step_values.shape[0], count + 1, dtype=torch.float)
    for row in range(step_values.shape[0]):
        values = step_values[row][mask[row]].float()
        by_step[row, :values.numel()] = values
    return by_step.gather(1, step_of.clamp(max=count))


def progress_advantages(prm_rewards: torch.Tensor, step_mask: torch.Tensor, group_ids: torch.Tensor,
                        outcome_rewards: torch.Tensor, weight: float, scale_by_std: bool = True,
                        eps: float = 1e-4) -> torch.Tensor:
    """Per-token advantages [B, C]: GRPO's group-normalised outcome plus `weight` times the group-normalised step
    credit of each token's own step (module docstring). `prm_rewards` holds `weight` x each step's score
    difference at its last token (what `prm_reward.add_prm_rewards` pays with credit "progress"); the credit is
    normalised on the unweighted differences and weighted once. Tokens after the last step end get the outcome
    part only; the caller masks what is not trained on."""
    if weight <= 0:
        raise ValueError(f"progress_advantages: weight must be > 0, got {weight}")
    credit = group_step_normalised(prm_rewards / weight, step_mask, group_ids, scale_by_std, eps)
    outcome = group_advantages(outcome_rewards, group_ids, scale_by_std, eps)
    return outcome[:, None] + weight * spread_over_steps(credit, step_mask)
