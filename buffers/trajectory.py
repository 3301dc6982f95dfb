"""`Trajectory`: one episode as the trainer sees it, in exact token ids."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Trajectory:
    """One episode: prompt ids, then every completion token (model-sampled or env-injected).

    completion_mask[t] is 1 for tokens the model sampled (trained on) and 0 for tokens the
    environment injected (calculator results, tool output, separators). logprobs[t] is the
    behaviour log-prob recorded at sampling time (0.0 for injected tokens). step_ends[k] is the index
    in completion_ids of the last token of step k, where step_rewards[k] is paid; single-turn
    episodes have one step ending at the last token. `reward` is the episode's total reward.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    completion_mask: list[int]
    reward: float
    step_rewards: list[float] = field(default_factory=list)
    step_ends: list[int] = field(default_factory=list)
    group_id: int = 0
    truncated: bool = False
    text: str = ""
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.completion_ids)
        if len(self.logprobs) != n or len(self.completion_mask) != n:
            raise ValueError(
                f"Trajectory: completion_ids ({n}), logprobs ({len(self.logprobs)}) and completion_mask "
                f"({len(self.completion_mask)}) must have the same length")
        if not self.step_ends:
            self.step_ends = [max(n - 1, 0)]
            self.step_rewards = [float(self.reward)]
        if len(self.step_ends) != len(self.step_rewards):
            raise ValueError("Trajectory: step_ends and step_rewards must have the same length")

    @property
    def num_generated_tokens(self) -> int:
        return int(sum(self.completion_mask))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Trajectory":
        return cls(**data)
