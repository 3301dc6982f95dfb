"""The batched episode engine: advance any set of live branches of one env by one action each.

A `Branch` is one episode in progress: its env state (`get_branch_state`), its token ids (the model's
own tokens as sampled, never re-tokenised, and the env's injected text), and what its state says about
the next action (which role acts, its stop strings). `EpisodeEngine.advance` samples one action for
every live branch given, in one batched `Policy.sample` call per role, each row with its branch's stop
strings, then steps the env from each branch's own state. Before the steps, the env is handed every
action of the batch (`prepare_steps`, where it has one: a tool env runs all of their tool calls at once,
e.g. one batched search) and each step then returns what it would alone. Text the env writes after an
action (`info["injected_text"]`) is appended as raw text tokens (`info["injected_role"]` None) or as a
chat-template turn of that role ("tool", "user") followed by the next assistant turn's opening, every
branch's turn tokenised in one call per policy (`encode_turns`); it is masked out of the loss (mask 0,
log-prob 0.0). Each action is recorded (`ActionRecord`: role, text, the
env's injected text and role), and `Branch.outcome` is the episode's typed `EpisodeOutcome` (the env's
info as `EpisodeOutcome.from_info` reads it, with those records): what search, metrics and trainers read.
Branches are plain dataclasses: `snapshot()` copies one, and a copy can be advanced later (tree search),
alone or with others.

TRL-style reward functions are called once per batch: an episode `advance` ends leaves them pending
(`info["pending_rewards"]`) and `score_pending` (by default at the end of that `advance`; a rollout, at the
end of the whole batch) calls each once with every such episode's completion and token ids.

Sampling noise: with `sample_key`, a branch's action is drawn with the key (sample_key, group id,
index in group, actions taken so far), so what it samples does not depend on which branches share its
batch or process; with a `torch.Generator`, the noise comes from the generator's stream.
"""
from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch.profiler import record_function

from lmgym.buffers import ActionRecord, EpisodeOutcome, Trajectory
from lmgym.core.checked_config import CheckedConfig
from lmgym.core.state_copy import deep_copy
from lmgym.envs.rewards.batch import PENDING, batched_trl_rewards, settle
from lmgym.episodes.env_state import (
    DEFAULT_ROLE,
    check_not_vector,
    declares_single_turn,
    detach_branch_state,
    episode_step_limit,
    get_branch_state,
    next_role,
    next_stop_strings,
    prepared_steps,
    set_branch_state,
)
from lmgym.policies.base import Policy
from lmgym.policies.decoding.continuous import Continuation
from lmgym.policies.decoding.generation import Generation, RowKeys, row_key
from lmgym.policies.decoding.step import FORCED_TOKENS
from lmgym.policies.turn_batches import encode_turns

INJECTED_ROLE = "env"  # the role of raw text the env injects (a chat turn's tokens carry that turn's role)
PLAY_ACTIONS = 4  # actions one continuous-play call makes room for (key/value columns); more go on in the next


@dataclass
class SamplingSettings(CheckedConfig):
    """How each action is sampled (the number of actions is the env's: `episode_step_limit(env)`)."""

    max_new_tokens: int = 64  # tokens per action
    temperature: float = 1.0  # 0: greedy
    top_p: float = 1.0  # nucleus mass kept
    max_prompt_tokens: int = 0  # the prompt's last N tokens are kept (TRL's max_prompt_length, from the left; 0: all)
    # continuous play (`EpisodeEngine.play`): env turns longer than FORCED_TOKENS, up to this many tokens, are fed in
    # one pass mid-call (policies/decoding/extension.py) instead of their branch going on in the next call; the
    # call keeps room for the longest turn seen. 0: off, the default: on one H200 with the 135M model, feeding the
    # RAG agent's search results this way was slower than re-prefilling them (benchmarks/RESULTS.md)
    fed_turn_tokens: int = 0


@dataclass
class Branch:
    """One episode in progress.

    ids/logprobs/mask/roles are per completion token (model-sampled: mask 1 and its behaviour log-prob;
    env-injected: mask 0, log-prob 0.0). `role` and `stop` describe the next action, as the env in
    `state` says. `actions` records each action played (see `ActionRecord`). `snapshot()` is an independent
    copy that can be advanced later.
    """

    group_id: int
    member: int  # index within its group (part of its sampling key)
    prompt_ids: list[int]
    state: dict  # get_branch_state(env) after the last reset or step
    role: str = DEFAULT_ROLE  # who acts next
    stop: list[str] | None = None  # the next action's stop strings
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)  # per token: the acting role, or who injected it
    step_ends: list[int] = field(default_factory=list)
    step_rewards: list[float] = field(default_factory=list)
    done: bool = False  # the env ended the episode (terminated or truncated)
    truncated: bool = False
    info: dict = field(default_factory=dict)  # the reset's info, updated by every step's
    text: str = ""
    actions: list[ActionRecord] = field(default_factory=list)
    # `state` is this branch's alone (taken from the env after its own step, or a snapshot's copy), so the next
    # step may hand the env its objects instead of copies; a group's branches share their reset state at first
    owns_state: bool = False

    @property
    def steps(self) -> int:
        """Actions taken so far."""
        return len(self.step_ends)

    @property
    def outcome(self) -> EpisodeOutcome:
        """The episode's facts so far: its env's latest info, typed (reward errors of every step), and its
        actions."""
        return EpisodeOutcome.from_info(self.info, self.actions)

    def snapshot(self) -> Branch:
        """A deep copy: advancing either one leaves the other as it is. The per-token lists hold numbers and
        strings and the actions are frozen, so list copies suffice for them; the env state and info are copied
        deeply."""
        twin = copy.copy(self)
        for name in ("prompt_ids", "ids", "logprobs", "mask", "roles", "step_ends", "step_rewards", "actions"):
            setattr(twin, name, list(getattr(self, name)))
        twin.stop = list(self.stop) if self.stop is not None else None
        twin.state, twin.info = deep_copy(self.state), deep_copy(self.info)
        twin.owns_state = True
        return twin

    def to_trajectory(self) -> Trajectory:
        """The episode as the trainer sees it; one the env has not ended counts as truncated and is marked
        `info["unfinished"]`. Per-token roles are kept only when some action was not the default role's."""
        info = {k: v for k, v in self.info.items() if isinstance(v, (str, int, float, bool, type(None), dict, list))}
        if not self.done:  # ran out of steps without the env ending the episode
            info["unfinished"] = True
        acted = {r for r, m in zip(self.roles, self.mask) if m}
        return Trajectory(prompt_ids=self.prompt_ids, completion_ids=self.ids, logprobs=self.logprobs,
                          completion_mask=self.mask, reward=float(sum(self.step_rewards)),
                          step_rewards=self.step_rewards, step_ends=self.step_ends, group_id=self.group_id,
                          truncated=self.truncated or not self.done, text=self.text, info=info,
                          roles=list(self.roles) if acted - {DEFAULT_ROLE} else [], outcome=self.outcome)


class EpisodeEngine:
    """Plays episodes of `env` with `policies`: one Policy for every role, or a mapping role -> Policy
    (the env's `current_role` picks the policy of each action). Every policy must share one tokenizer.

    `env_seconds` adds up the time spent in the env (resets, steps, state saves and restores, `prepare_steps`);
    `tokenize_seconds` the time spent tokenising the env's injected text.
    """

    def __init__(self, env, policies: Policy | Mapping[str, Policy], settings: SamplingSettings | None = None):
        check_not_vector(env, "EpisodeEngine")
        self.env = env
        self.policies = _checked_policies(policies)
        self.settings = settings if settings is not None else SamplingSettings()
        self.step_limit = episode_step_limit(env)
        # an env that says its episodes are one action is sampled in plain calls: a continuous-play call would keep
        # key/value room for PLAY_ACTIONS actions a row (4x the columns every decode step reads) that it never uses
        self.single_turn = declares_single_turn(env)
        self.env_seconds = 0.0
        self.tokenize_seconds = 0.0
        self.injected_room = FORCED_TOKENS  # key/value columns a continuous-play call keeps per env turn

    def policy_for(self, role: str) -> Policy:
        """The policy that samples `role`'s actions."""
        if not isinstance(self.policies, Mapping):
            return self.policies
        if role not in self.policies:
            raise ValueError(f"EpisodeEngine: the env's role {role!r} has no policy (roles: "
                             f"{', '.join(map(repr, self.policies))})")
        return self.policies[role]

    def start(self, starts: Sequence[dict], group_size: int = 1, first_group_id: int = 0) -> list[Branch]:
        """`group_size` branches from each reset in `starts` (kwargs for env.reset, e.g. {"seed": 3}); the
        branches of one start share a group id (first_group_id + its index) and its initial state."""
        if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 1:
            raise ValueError(f"EpisodeEngine.start: group_size must be an int >= 1; got {group_size!r}")
        branches = []
        for k, start in enumerate(starts):
            clock = time.perf_counter()
            observation, info = self.env.reset(**start)
            state, role, stop = get_branch_state(self.env), next_role(self.env), next_stop_strings(self.env)
            self.env_seconds += time.perf_counter() - clock
            prompt_ids = self.policy_for(role).format_prompt(observation)
            if 0 < self.settings.max_prompt_tokens < len(prompt_ids):
                prompt_ids = prompt_ids[-self.settings.max_prompt_tokens:]
            branches += [Branch(first_group_id + k, member, list(prompt_ids), state, role, stop, info=dict(info))
                         for member in range(group_size)]
        return branches

    def is_live(self, branch: Branch) -> bool:
        """Not ended by the env and under the env's step limit."""
        return not branch.done and branch.steps < self.step_limit

    def live(self, branches: Sequence[Branch]) -> list[Branch]:
        """The live branches among `branches`, in order."""
        return [b for b in branches if self.is_live(b)]

    def advance(self, branches: Sequence[Branch], generator: torch.Generator | None = None,
                sample_key: int | None = None, score: bool = True) -> list[Branch]:
        """One action for each live branch among `branches` (changed in place): sampled in one batched call
        per role, then stepped in the env from the branch's own state. Returns the branches advanced.

        sample_key: keys each branch's noise by (sample_key, group id, member, steps) instead of drawing
        it from `generator`. score: settle the TRL-style rewards of the episodes this call ended, in one call
        per function (False: leave them pending for a later `score_pending`, e.g. a rollout's whole batch)."""
        live = self.live(branches)
        if len({id(b) for b in live}) != len(live):
            raise ValueError("EpisodeEngine.advance: a branch is given twice; snapshot() it to branch off")
        by_role: dict[str, list[Branch]] = {}
        for branch in live:
            by_role.setdefault(branch.role, []).append(branch)
        actions: dict[int, tuple[Generation, Policy]] = {}
        for role, group in by_role.items():
            policy = self.policy_for(role)
            for branch, generation in zip(group, self._sample(policy, group, generator, sample_key)):
                actions[id(branch)] = (generation, policy)
        self._settle(live, actions, score)
        return live

    def play(self, branches: Sequence[Branch], generator: torch.Generator | None = None,
             sample_key: int | None = None, score: bool = True,
             after_step: Callable[[Branch], None] | None = None) -> int:
        """Play every live branch among `branches` to its end (changed in place); `after_step(branch)` runs after
        each action of each branch, once the env stepped it. Returns the sampling rounds it took.

        Where one policy that can play continuously (`Policy.play`: the fast decoder) acts for every branch, the
        episodes go on inside one decoding call: each action is stepped as soon as it ends, with the others that
        ended at the same host sync, and its branch samples on without waiting for the rest
        (policies/decoding/continuous.py); a branch whose next turn does not fit that call goes on in the next,
        and after a call in which no branch went on (every turn the env wrote was too long), plain rounds.
        Otherwise, for an env that says its episodes are one action (`declares_single_turn`), and where every
        branch has one action left, it is `advance` until no branch is live. Either way each action is sampled
        as `advance` samples it: with `sample_key`, the same tokens."""
        rounds, continuous = 0, True
        while live := self.live(branches):
            policy = self._continuous_policy(live) if continuous else None
            if policy is None or self.single_turn or self.step_limit - min(b.steps for b in live) < 2:
                # one action each: a plain call
                self.advance(live, generator, sample_key, score)
                for branch in live:
                    if after_step is not None:
                        after_step(branch)
            else:
                # a call in which no action went on was a plain round with more bookkeeping: plain rounds from here,
                # unless the env wrote a turn longer than the call had room for (the next call makes room for it)
                room = self.injected_room
                went_on = self._play_continuously(policy, live, generator, sample_key, score, after_step)
                continuous = went_on > 0 or self.injected_room > room
            rounds += 1
        return rounds

    def _continuous_policy(self, live: list[Branch]) -> Policy | None:
        """The policy that acts for every branch of `live`, when it can play continuously; else None."""
        policies = {id(self.policy_for(branch.role)): self.policy_for(branch.role) for branch in live}
        if len(policies) != 1:
            return None
        policy = next(iter(policies.values()))
        return policy if getattr(policy, "can_play", False) else None

    def _play_continuously(self, policy: Policy, live: list[Branch], generator, sample_key, score: bool,
                           after_step) -> int:
        """One `Policy.play` call over `live`: each ended action is settled at once, and its branch goes on with the
        env's injected tokens when it is still live and `policy` acts next. Returns how many actions went on in the
        call (a branch the decoder lets go is played on by the next call). The call keeps `injected_room` columns
        per action for the env's turns; with `fed_turn_tokens`, the room grows to the longest turn seen, on a
        ladder of 64, that many tokens at most."""
        s = self.settings
        noise = generator if sample_key is None else RowKeys(
            [row_key(sample_key, b.group_id, b.member, b.steps) for b in live])
        actions_left = min(self.step_limit - min(b.steps for b in live), PLAY_ACTIONS)
        settled: list[int] = []  # the branch of every action settled in the call

        def on_actions(ended: list[tuple[int, Generation]]) -> list[Continuation | None]:
            branches = [live[i] for i, _ in ended]
            settled.extend(i for i, _ in ended)
            before = [len(b.ids) + len(g.completion_ids) for b, (_, g) in zip(branches, ended)]
            self._settle(branches, {id(live[i]): (g, policy) for i, g in ended}, score)
            going: list[Continuation | None] = []
            for branch, start in zip(branches, before):
                if after_step is not None:
                    after_step(branch)
                if not self.is_live(branch) or self.policy_for(branch.role) is not policy:
                    going.append(None)
                    continue
                key = None if sample_key is None else row_key(sample_key, branch.group_id, branch.member,
                                                              branch.steps)
                going.append(Continuation(branch.ids[start:], branch.stop, key))
                longest[0] = max(longest[0], len(going[-1].injected))
            return going

        longest = [0]
        with record_function("lmgym.sample"):
            policy.play([b.prompt_ids + b.ids for b in live], s.max_new_tokens, actions_left, s.temperature, s.top_p,
                        [b.stop for b in live], noise, on_actions, injected=self.injected_room)
        if longest[0] > self.injected_room and s.fed_turn_tokens > self.injected_room:
            self.injected_room = min(-(-longest[0] // 64) * 64, s.fed_turn_tokens)
        return len(settled) - len(set(settled))  # actions past each branch's first

    def _settle(self, live: list[Branch], actions: dict[int, tuple[Generation, Policy]], score: bool) -> None:
        """Step the env for each branch of `live` with its sampled action (all of their tool calls prepared at
        once), append what the env injected, and settle the TRL-style rewards of the episodes that ended."""
        with record_function("lmgym.env"), batched_trl_rewards(self.env):  # TRL-style rewards: score_pending
            clock = time.perf_counter()
            with prepared_steps(self.env, [actions[id(branch)][0].text for branch in live]):
                self.env_seconds += time.perf_counter() - clock
                injections = self._step_all(live, actions)
        self._inject([injection for injection in injections if injection is not None])
        if score:
            self.score_pending(live)

    def score_pending(self, branches: Sequence[Branch]) -> None:
        """Score the TRL-style rewards that `branches`' finished episodes left pending: each function once over
        all of them, with their completions and completion token ids (see envs/rewards/batch.py)."""
        pending = [b for b in branches if PENDING in b.info]
        if not pending:
            return
        clock = time.perf_counter()
        settled = settle(self.env, [(b.info, b.ids) for b in pending])
        for branch, (reward, update) in zip(pending, settled):
            del branch.info[PENDING]
            branch.info.update(update)
            branch.step_rewards[-1] = reward
        self.env_seconds += time.perf_counter() - clock

    def _sample(self, policy: Policy, group: list[Branch], generator, sample_key) -> list[Generation]:
        s = self.settings
        noise = generator if sample_key is None else RowKeys(
            [row_key(sample_key, b.group_id, b.member, b.steps) for b in group])
        with record_function("lmgym.sample"):
            samples = policy.sample([b.prompt_ids + b.ids for b in group], 1, s.max_new_tokens, s.temperature, s.top_p,
                                    [b.stop for b in group], noise)
        return [generation for (generation,) in samples]

    def _step_all(self, live: list[Branch], actions: dict[int, tuple[Generation, Policy]]) -> list[_Injection | None]:
        """`_step` each branch in turn; then the env gets copies of its objects, which the last branch stepped
        took as its state (even when a step raises)."""
        injections: list[_Injection | None] = []
        try:
            for branch in live:
                injections.append(self._step(branch, *actions[id(branch)]))
        finally:
            if injections:
                clock = time.perf_counter()
                detach_branch_state(self.env)
                self.env_seconds += time.perf_counter() - clock
        return injections

    def _step(self, branch: Branch, generation: Generation, policy: Policy) -> _Injection | None:
        """Play `generation` as the branch's action; record its tokens, reward and the env's injected text,
        and return that text to append (None: nothing follows)."""
        clock = time.perf_counter()
        # a state only this branch holds goes in as it is (the step changes it, and it is taken back); a shared
        # one as copies
        set_branch_state(self.env, branch.state, copy=not branch.owns_state)
        _, reward, terminated, truncated, info = self.env.step(generation.text)
        branch.state = get_branch_state(self.env, copy=False)  # the env's objects: the next restore replaces them
        branch.owns_state = True
        done, acting = bool(terminated or truncated), branch.role
        if not done:  # what the new state says about the next action
            branch.role, branch.stop = next_role(self.env), next_stop_strings(self.env)
        self.env_seconds += time.perf_counter() - clock
        _append(branch, generation.completion_ids, generation.logprobs, generation.text, acting, trained=True)
        branch.step_ends.append(len(branch.ids) - 1)
        branch.step_rewards.append(float(reward))
        errors = {**branch.info.get("reward_errors", {}), **(info.get("reward_errors") or {})}
        branch.info.update(info)
        if errors:  # a reward function failed on this sample (any step): kept for the loop to count
            branch.info["reward_errors"] = {str(k): str(v) for k, v in errors.items()}
        branch.done = done
        branch.truncated = branch.truncated or bool(truncated) or generation.finish_reason == "length"
        injected = (info.get("injected_text") or "") if not done else ""  # nothing follows the final action
        injected_role = info.get("injected_role") if injected else None
        branch.actions.append(ActionRecord(acting, generation.text, injected, injected_role))
        return _Injection(branch, policy, injected, injected_role) if injected else None

    def _inject(self, injections: list[_Injection]) -> None:
        """Append each branch's injected text: raw tokens (role None) or a chat-template turn of its role, never
        trained on; the turns of one policy are tokenised in one call (`encode_turns`)."""
        clock = time.perf_counter()
        by_policy: dict[int, list[_Injection]] = {}
        for injection in injections:
            by_policy.setdefault(id(injection.policy), []).append(injection)
        with record_function("lmgym.tokenize"):
            for group in by_policy.values():
                policy = group[0].policy
                turns = encode_turns(policy, [(item.text, item.role, item.branch.ids) for item in group])
                for item, ids in zip(group, turns):
                    if item.role is None:
                        _append(item.branch, ids, None, item.text, INJECTED_ROLE, trained=False)
                    else:
                        _append(item.branch, ids, None, policy.tokenizer.decode(ids), item.role, trained=False)
        self.tokenize_seconds += time.perf_counter() - clock


@dataclass(frozen=True)
class _Injection:
    """Text the env wrote after a branch's action, to append: by `policy`'s tokenizer, raw (role None) or as
    a chat turn of `role`."""

    branch: Branch
    policy: Policy
    text: str
    role: str | None


def _append(branch: Branch, ids: list[int], logprobs: list[float] | None, text: str, role: str,
            trained: bool) -> None:
    branch.ids += ids
    branch.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
    branch.mask += [int(trained)] * len(ids)
    branch.roles += [role] * len(ids)
    branch.text += text


def _checked_policies(policies) -> Policy | dict[str, Policy]:
    """A Policy, or a non-empty dict of role name -> Policy whose tokenizers agree on the vocabulary."""
    if not isinstance(policies, Mapping):
        if not callable(getattr(policies, "sample", None)):
            raise ValueError(f"EpisodeEngine: policies must be a Policy or a mapping role -> Policy; "
                             f"got {type(policies).__name__}")
        return policies
    if not policies:
        raise ValueError("EpisodeEngine: policies is an empty mapping; give role -> Policy for each role")
    for role, policy in policies.items():
        if not isinstance(role, str) or not role or not callable(getattr(policy, "sample", None)):
            raise ValueError(f"EpisodeEngine: policies must map role names to Policies; got {role!r}: "
                             f"{type(policy).__name__}")
    sizes = {role: len(policy.tokenizer) for role, policy in policies.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"EpisodeEngine: the roles' tokenizers differ (vocabulary sizes {sizes}); one episode's "
                         f"token ids must mean the same to every policy")
    return dict(policies)
