"""Running a policy in a language environment and recording trajectories in exact token ids.

Works for single-turn envs (one action) and stepwise envs (one reasoning step per action): each
episode is a branch holding its env state and its token ids; all live branches are sampled together
in one batch per step. Text the env injects (calculator results, separators) is tokenised and
appended with completion_mask 0, so the loss never trains on it; the model's own tokens are kept as
sampled, never re-tokenised.

Wrapped envs (any ``gymnasium.Wrapper`` chain, e.g. ``TimeLimit(env)``) work: ``reset`` and ``step``
go through the wrappers, so their logic applies; ``get_state``/``set_state``/``stop_strings`` are read
from ``env.unwrapped``. Each wrapper's plain-data attributes (numbers, strings, None and lists, tuples,
dicts of them, e.g. TimeLimit's step counter) are saved and restored with the episode state, so
branches never see each other's steps; any other attribute is shared by all branches. A wrapper may
change the prompt (the reset observation), the action text the env scores, the reward,
``terminated``/``truncated`` and ``info``; later observations are not re-read (the transcript is
rebuilt from token ids plus ``info["injected_text"]``), and it must not change which problems exist.
An episode a wrapper truncates before the env finishes it is not scored by the env's reward
functions (the env's own ``max_steps`` truncation is).
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from buffers import Trajectory
from policies.base import Policy
from policies.generation import RowKeys, row_key


@dataclass
class SamplingSettings:
    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    max_episode_steps: int = 10


@dataclass
class _Branch:
    group_id: int
    member: int  # index within its group
    prompt_ids: list[int]
    state: dict
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    step_ends: list[int] = field(default_factory=list)
    step_rewards: list[float] = field(default_factory=list)
    done: bool = False
    truncated: bool = False
    info: dict = field(default_factory=dict)
    text: str = ""


def is_stepwise(env) -> bool:
    return getattr(_base(env), "mode", "single") == "stepwise"


def get_branch_state(env) -> dict[str, Any]:
    """The episode state of a (possibly wrapped) env: the base env's state plus each wrapper's plain data."""
    return {"env": _base(env).get_state(), "wrappers": [_plain_attributes(w) for w in _wrappers(env)]}


def set_branch_state(env, state: dict[str, Any]) -> None:
    """Restore a state from ``get_branch_state`` into the same (possibly wrapped) env."""
    for wrapper, attributes in zip(_wrappers(env), state["wrappers"]):
        vars(wrapper).update(copy.deepcopy(attributes))
    _base(env).set_state(state["env"])


def _base(env):
    return getattr(env, "unwrapped", env)


def _wrappers(env) -> list:
    layers = []
    while env is not _base(env) and hasattr(env, "env"):
        layers.append(env)
        env = env.env
    return layers


def _plain_attributes(wrapper) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in vars(wrapper).items() if k != "env" and _is_plain(v)}


def _is_plain(value: Any, depth: int = 0) -> bool:
    """True for None, bool, int, float, str and (up to 4 levels) lists, tuples and str-keyed dicts of them."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if depth >= 4:
        return False
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v, depth + 1) for k, v in value.items())
    return False


def rollout(env, policy: Policy, starts: list[dict], group_size: int, settings: SamplingSettings,
            generator: torch.Generator | None = None, first_group_id: int = 0, timings: dict | None = None,
            sample_key: int | None = None) -> list[Trajectory]:
    """Play `group_size` episodes from each reset in `starts` (kwargs for env.reset, e.g. {"seed": 3}).

    Episodes of one start share a group id and the same initial env state. When `timings` is given,
    the seconds spent in the env (resets, steps: reward scoring) are added to timings["score"].
    With `sample_key` (instead of `generator`), each episode's sampling noise depends only on
    (sample_key, group id, index in group, step), so splitting `starts` over processes samples the same.
    """
    env_seconds = 0.0
    clock = time.perf_counter()
    branches: list[_Branch] = []
    for k, start in enumerate(starts):
        obs, info = env.reset(**start)
        state = get_branch_state(env)
        prompt_ids = policy.format_prompt(obs)
        for member in range(group_size):
            branches.append(_Branch(first_group_id + k, member, prompt_ids, state, info=dict(info)))
    env_seconds += time.perf_counter() - clock
    stop = getattr(_base(env), "stop_strings", ["\n"] if is_stepwise(env) else None)
    for step in range(settings.max_episode_steps):
        live = [b for b in branches if not b.done]
        if not live:
            break
        noise = generator if sample_key is None else RowKeys(
            [row_key(sample_key, b.group_id, b.member, step) for b in live])
        gens = policy.sample([b.prompt_ids + b.ids for b in live], 1, settings.max_new_tokens,
                             settings.temperature, settings.top_p, stop, noise)
        for branch, (gen,) in zip(live, gens):
            clock = time.perf_counter()
            set_branch_state(env, branch.state)
            _, reward, terminated, truncated, info = env.step(gen.text)
            branch.state = get_branch_state(env)
            env_seconds += time.perf_counter() - clock
            branch.ids += gen.completion_ids
            branch.logprobs += gen.logprobs
            branch.mask += [1] * len(gen.completion_ids)
            branch.text += gen.text
            branch.step_ends.append(len(branch.ids) - 1)
            branch.step_rewards.append(float(reward))
            errors = {**branch.info.get("reward_errors", {}), **(info.get("reward_errors") or {})}
            branch.info.update(info)
            if errors:  # a reward function failed on this sample (any step): kept for the loop to count
                branch.info["reward_errors"] = {str(k): str(v) for k, v in errors.items()}
            branch.done = bool(terminated or truncated)
            branch.truncated = branch.truncated or bool(truncated) or gen.finish_reason == "length"
            injected = info.get("injected_text", "")
            if injected and not branch.done:
                inj_ids = policy.encode_text(injected)
                branch.ids += inj_ids
                branch.logprobs += [0.0] * len(inj_ids)
                branch.mask += [0] * len(inj_ids)
                branch.text += injected
    if timings is not None:
        timings["score"] = timings.get("score", 0.0) + env_seconds
    return [_to_trajectory(b) for b in branches]


def _to_trajectory(b: _Branch) -> Trajectory:
    info = {k: v for k, v in b.info.items() if isinstance(v, (str, int, float, bool, type(None), dict, list))}
    if not b.done:  # ran out of steps without the env ending the episode
        info["unfinished"] = True
    return Trajectory(prompt_ids=b.prompt_ids, completion_ids=b.ids, logprobs=b.logprobs, completion_mask=b.mask,
                      reward=float(sum(b.step_rewards)), step_rewards=b.step_rewards, step_ends=b.step_ends,
                      group_id=b.group_id, truncated=b.truncated or not b.done, text=b.text, info=info)
