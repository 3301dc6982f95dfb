"""A process reward model's step scores as a dense reward beside the env's (`prm_weight`, `outcome_weight`).

After the reward components are combined, `weigh_rewards` scales the env's own reward by `outcome_weight`
and adds the PRM's score of every step, times `prm_weight`, at that step's last token. Both are reward
shaping terms on the trajectory ("outcome_scale", "prm"), paid per token (TOKEN_REWARD_SHAPING): the
token rewards PPO's GAE and REINFORCE's returns read carry them where they belong, `env_reward` stays
the env's own (so the reward and accuracy metrics and DAPO's dynamic sampling are unchanged), and
`Trajectory.reset_run_data` takes them off again. GRPO reads the per-step scores from the declared
fields PRM_REWARDS and STEP_ENDS (lmgym.algorithms.advantages.process_advantages).

With `prm_credit="progress"` a step is paid its score minus the score before it (algorithms/prm/step_credit.py:
Setlur et al.'s process advantage; the episode's PRM rewards telescope, so longer solutions earn no more), and
GRPO gives each step's tokens the step's own normalised credit beside the outcome advantage.

How each algorithm uses it: GRPO, DAPO and Dr. GRPO (GRPO's `advantages`) take DeepSeekMath's
process-supervised advantages (Dr. GRPO centring without the std, as its outcome advantages; DAPO's
dynamic sampling still judges groups by the env's reward); PPO's GAE and REINFORCE-stable's
discounted returns read the per-token rewards as they are; RLOO keeps its leave-one-out baseline over
each episode's total reward, the PRM's step rewards summed into it (no per-step credit).

The scorer is anything with `score_trajectories(trajectories) -> list[list[float]]`: per trajectory,
one score in [0, 1] per step (`step_ends`), in step order (lmgym.policies.prm.ProcessRewardModel is one).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from lmgym.algorithms.config import RLConfig
from lmgym.algorithms.prm.step_credit import score_progress
from lmgym.buffers import TOKEN_REWARD_SHAPING, TokenField, Trajectory
from lmgym.training.config import ConfigError

PRM_CREDITS = ("score", "progress")  # what a step is paid: its score, or its score minus the one before

PRM_REWARDS = TokenField("prm_rewards", "prm_weight times the PRM's credit of each step (its score, or with "
                                        "prm_credit 'progress' its score difference), at the step's last token "
                                        "(0 elsewhere)")
STEP_ENDS = TokenField("step_end_mask", "1 at the last token of each step the PRM scored, 0 elsewhere")


class TrajectoryScorer(Protocol):
    """What the dense reward needs of a PRM: per trajectory, one score in [0, 1] per step, in step order."""

    def score_trajectories(self, trajectories: Sequence[Trajectory]) -> list[list[float]]: ...


def check_prm(prm, config: RLConfig, tokenizer=None):
    """`prm` when it fits `config` and the policy's `tokenizer`: prm_weight > 0 needs one, one must have
    `score_trajectories` when prm_weight > 0 (a search that only scores branches needs `score_branches`), and one
    with a `tokenizer` must share the policy's vocabulary (it scores the
    policy's token ids). One-line ConfigError / TypeError / ValueError otherwise. A PRM with prm_weight 0
    is kept (search uses it)."""
    if config.prm_weight > 0 and prm is None:
        raise ConfigError(f"{type(config).__name__}.prm_weight is {config.prm_weight}, but no PRM was given: pass "
                          f"prm= (e.g. lmgym.policies.prm.ProcessRewardModel.from_pretrained(path)) or set prm_weight "
                          f"to 0", "prm_weight")
    if config.prm_weight > 0 and not callable(getattr(prm, "score_trajectories", None)):
        raise TypeError(f"prm= needs a score_trajectories(trajectories) method; got a {type(prm).__name__}")
    own = getattr(prm, "tokenizer", None)
    if own is not None and tokenizer is not None and own.get_vocab() != tokenizer.get_vocab():
        raise ValueError("the PRM's tokenizer differs from the policy's; it scores the policy's token ids, so it "
                         "must share its tokenizer (build it with ProcessRewardModel.from_policy)")
    return prm


def step_indicator(t: Trajectory) -> list[float]:
    """1.0 at the last token of each of `t`'s steps, 0.0 elsewhere (one value per completion token)."""
    marks = [0.0] * len(t.completion_ids)
    for end in t.step_ends:
        marks[end] = 1.0
    return marks


def env_step_rewards(t: Trajectory) -> list[float]:
    """The env's own reward of each step: `step_rewards` less the shaping paid at the last step."""
    per_token = sum(TOKEN_REWARD_SHAPING.get(t)) if TOKEN_REWARD_SHAPING.has(t) else 0.0
    paid_at_last_step = sum(t.shaping.values()) - per_token
    return [*t.step_rewards[:-1], t.step_rewards[-1] - paid_at_last_step]


def scale_outcome(trajectories: list[Trajectory], weight: float) -> None:
    """Scale each trajectory's env reward by `weight`: shaping "outcome_scale" of (weight - 1) times each
    step's env reward, paid at that step's last token. Nothing at weight 1."""
    if weight == 1.0:
        return
    for t in trajectories:
        if not t.completion_ids:
            continue
        per_token = [0.0] * len(t.completion_ids)
        for end, reward in zip(t.step_ends, env_step_rewards(t)):
            per_token[end] += (weight - 1.0) * reward
        t.add_shaping("outcome_scale", sum(per_token), per_token)


def checked_scores(scores, trajectories: list[Trajectory]) -> list[list[float]]:
    """The scorer's output, or a one-line ValueError: one list per trajectory, one finite score in [0, 1]
    per step."""
    scores = list(scores)
    if len(scores) != len(trajectories):
        raise ValueError(f"the PRM scored {len(scores)} trajectories, {len(trajectories)} were given")
    for i, (row, t) in enumerate(zip(scores, trajectories)):
        row = list(row)
        if len(row) != len(t.step_ends):
            raise ValueError(f"the PRM gave trajectory {i} {len(row)} step scores for its {len(t.step_ends)} steps")
        bad = [s for s in row if not (isinstance(s, (int, float)) and math.isfinite(s) and 0.0 <= s <= 1.0)]
        if bad:
            raise ValueError(f"the PRM's step scores must be numbers in [0, 1]; trajectory {i} has {bad[0]!r}")
        scores[i] = [float(s) for s in row]
    return scores


def add_prm_rewards(trajectories: list[Trajectory], prm: TrajectoryScorer, weight: float,
                    credit: str = "score") -> dict[str, float]:
    """Score every trajectory's steps with `prm` (one batched `score_trajectories` call) and pay `weight`
    times each step's credit at its last token (shaping "prm"; fields PRM_REWARDS and STEP_ENDS set): with
    `credit` "score" the step's score, with "progress" its score minus the one before (algorithms/prm/step_credit.py;
    the first step against its group's mean first-step score). Returns `prm_score`, the mean step score, and
    `prm_solution_score`, the mean over trajectories of their lowest step score (with "progress" also
    `prm_progress`, the mean absolute step credit). Trajectories without completion tokens get empty fields
    and no score."""
    if credit not in PRM_CREDITS:
        raise ValueError(f"prm credit must be one of {', '.join(PRM_CREDITS)}, got {credit!r}")
    scored = [t for t in trajectories if t.completion_ids]
    for t in trajectories:
        if not t.completion_ids:
            PRM_REWARDS.set(t, [])
            STEP_ENDS.set(t, [])
    if not scored:
        return {}
    scores = checked_scores(prm.score_trajectories(scored), scored)
    credits = scores if credit == "score" else score_progress(scores, [t.group_id for t in scored])
    for t, row in zip(scored, credits):
        per_token = [0.0] * len(t.completion_ids)
        for end, score in zip(t.step_ends, row):
            per_token[end] += weight * score
        t.add_shaping("prm", sum(per_token), per_token)
        PRM_REWARDS.set(t, per_token)
        STEP_ENDS.set(t, step_indicator(t))
    steps = [s for row in scores for s in row]  # every trajectory has at least one step
    metrics = {"prm_score": sum(steps) / len(steps), "prm_solution_score": sum(map(min, scores)) / len(scores)}
    if credit == "progress":
        metrics["prm_progress"] = sum(abs(c) for row in credits for c in row) / len(steps)
    return metrics


def prm_description(prm) -> dict[str, str]:
    """What a run's config.json records of its PRM: {"prm": its name_or_path (else its class)}; {} without one."""
    return {} if prm is None else {"prm": str(getattr(prm, "name_or_path", None) or type(prm).__name__)}


def weigh_rewards(trajectories: list[Trajectory], prm: TrajectoryScorer | None, config: RLConfig) -> dict[str, float]:
    """The env's reward times `outcome_weight`, plus the PRM's step scores times `prm_weight` (when > 0).
    Returns the PRM metrics (empty when it is off). With the defaults (1, 0) nothing changes."""
    scale_outcome(trajectories, config.outcome_weight)
    if config.prm_weight > 0:
        return add_prm_rewards(trajectories, prm, config.prm_weight, config.prm_credit)
    return {}
