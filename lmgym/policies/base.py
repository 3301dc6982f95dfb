"""The policy contract: every member the toolkit calls on a policy, as protocols, each with who calls it.

Five protocols, each adding what one group of callers needs, so a new policy implements only what it uses:

- `Policy`: sample completions and score given ones (the episode engine, rollout, evaluation, search, serving,
  the KL reference's scoring).
- `TrainableModel`: what `Trainer` itself calls on the model it trains (a policy, or the PRM).
- `TrainablePolicy(Policy, TrainableModel)`: what every RL algorithm (GRPO, REINFORCE, RLOO, DAPO, MCTS
  search), DPO, checkpoints and the KL reference (algorithms/reference.py) call.
- `DataParallelPolicy(TrainablePolicy)`: the seam DDP and FSDP use (training/data_parallel.py,
  training/fsdp.py, training/checkpoints/trainer_state.py); without it DDP falls back to one all-reduce, FSDP refuses.
- `BackbonePolicy(TrainablePolicy)`: a decoder backbone and lm-head to reach into: PPO's value head, SFT's
  packed pass, `ProcessRewardModel.from_policy`, regional compilation.

They are `typing.Protocol`s, runtime-checkable: a vLLM-backed sampler or a wrapper of a non-HF model conforms
by having the members, without inheriting (no metaclass to share with `nn.Module`), and type checkers
check it structurally. A class that does inherit gets the default methods (`encode_text`, `encode_turn`) and
attributes, and abstract-method checks at instantiation. `isinstance` only sees that members exist;
`lmgym.policies.contract.check_contract` also checks each method can be called as declared (trainers run it).
`HFPolicy` implements all five.
"""
from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from lmgym.policies.chat_turns import turn_ids
from lmgym.policies.decoding.generation import Generation, RowKeys, StopLists
from lmgym.policies.prompting import Observation


@runtime_checkable
class Policy(Protocol):
    """A language-model policy: observations and actions are text; training works on token ids.

    Attributes with a default here may be left out by a class that inherits from `Policy`.
    """

    tokenizer: Any
    """A Hugging Face-style tokenizer: `tokenizer(text, add_special_tokens=False)["input_ids"]`, `decode`,
    `len()`, `eos_token_id`, `pad_token_id` (the engine checks that roles share one vocabulary)."""
    use_chat_template: bool = False
    """True where observations and injected turns are written with the chat template."""
    system_prompt: str | None = None
    """The system message `format_prompt` writes first (None: none, or the template's default)."""
    name_or_path: str | None = None
    """The model's hub name or path: recorded in config.json, the served model's name (None: unnamed)."""
    device: torch.device = torch.device("cpu")
    """Where its tensors live: sampling generators and training batches are made there."""
    on_tokens: Callable[[int], None] | None = None
    """Progress hook set by callers: `sample` calls it with the number of tokens added at each decoding step."""

    @abstractmethod
    def format_prompt(self, observation: Observation) -> list[int]:
        """Token ids of the full model input for an environment observation: text, or a list of chat messages
        (chat template applied; see `lmgym.policies.prompting.prompt_ids`)."""

    @abstractmethod
    def sample(
        self,
        prompts: list[list[int]],
        n: int = 1,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: StopLists = None,
        generator: torch.Generator | RowKeys | None = None,
    ) -> list[list[Generation]]:
        """`n` completions for each prompt (a list of n Generations per prompt), each with its exact token ids
        and the log-probs (under `temperature`) it was sampled with; temperature 0 is greedy.

        stop: None, one list of stop strings for every prompt, or one list (or None) per prompt.
        generator: a torch.Generator, or `RowKeys` (one key per prompt: noise that no batch neighbour changes)."""

    @abstractmethod
    def token_logprobs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_start: int | torch.Tensor,
        temperature: float = 1.0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(log-probs, entropies) [B, C] of the completion tokens given everything before them, with gradients
        when they are enabled.

        completion_start: the column where every row's completion starts (int), or the positions [B, C]
        of each row's completion tokens (Batch.completion_positions).
        """

    def encode_text(self, text: str) -> list[int]:
        """Token ids of a text fragment (no special tokens), e.g. an environment's injected output."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def encode_turn(self, text: str, role: str, after: Sequence[int] = ()) -> list[int]:
        """Token ids that close the assistant's turn, open a `role` turn ("tool", "user") holding `text` and
        open the next assistant turn, as the chat template writes them; `encode_text(text)` without one.

        after: the tokens the turn follows; when they already end with the assistant's end-of-turn token
        (it sampled its EOS), the turn does not close it again. ValueError (one line) for a role the
        template rejects.
        """
        if not self.use_chat_template:
            return self.encode_text(text)
        return turn_ids(self.tokenizer, text, role, after)


@runtime_checkable
class TrainableModel(Protocol):
    """What `Trainer` (training/trainer.py, training/checkpoints/trainer_state.py) calls on the model it trains."""

    device: torch.device
    """Where its weights are: the trainer's generator and batches are made there."""
    bf16: bool
    """bf16 autocast in its forward passes on CUDA; the Trainer sets it from `TrainerConfig.bf16`."""
    name_or_path: str | None
    """The model it came from, recorded in config.json (None: unnamed)."""

    @abstractmethod
    def parameters(self) -> Iterable[torch.Tensor]:
        """The tensors the optimizer trains (broadcast from rank 0 at the start of a multi-process run)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Every weight by name: a checkpoint's "policy" entry."""

    @abstractmethod
    def load_state_dict(self, state_dict: dict[str, Any]) -> Any:
        """Restore the weights `state_dict()` returned."""

    @abstractmethod
    def save(self, directory: str | Path, generation: dict | None = None, merged: bool = False) -> None:
        """Write a model folder others load (`Trainer.save_model`); `generation`: generation-config fields;
        `merged`: LoRA adapters merged into the base (a policy without adapters ignores it)."""


@runtime_checkable
class TrainablePolicy(Policy, TrainableModel, Protocol):
    """A policy every trainer of policies takes: GRPO and the RLAlgorithm family, DPO, checkpoints, the KL
    reference (a given `ref_policy` is one too; the default is `frozen_copy()`)."""

    model: torch.nn.Module
    """The module holding every weight: trainers call `train()`/`eval()` around updates, the reference
    re-sync loads its `state_dict`, FSDP gathers it."""
    is_lora: bool
    """True when `model` is a peft model whose adapters alone train: the KL reference then scores with them
    disabled (`model.disable_adapter()`) or with a reference adapter (policies/reference_adapter.py)."""

    @abstractmethod
    def frozen_copy(self) -> TrainablePolicy:
        """A copy that keeps today's weights, without gradients (the KL reference); a LoRA policy may share
        `model` (its reference is the adapter-free base)."""


@runtime_checkable
class DataParallelPolicy(TrainablePolicy, Protocol):
    """The seam DDP and FSDP use: which module to wrap or shard, and how the policy routes passes through it."""

    @abstractmethod
    def data_parallel_module(self) -> torch.nn.Module:
        """The module every training forward pass runs through (DDP wraps it; FSDP shards it in place)."""

    @abstractmethod
    def use_data_parallel(self, wrapper: torch.nn.Module | None) -> None:
        """Run grad-enabled passes through `wrapper` (DDP around `data_parallel_module()`); None: directly."""

    @abstractmethod
    def use_sampling_weights(self, context: Callable[[], AbstractContextManager] | None) -> None:
        """Sample inside `context()` (FSDP: the sharded layers gathered whole); None: no context."""

    @abstractmethod
    def unsharded_copy(self, state_dict: dict[str, torch.Tensor]) -> TrainablePolicy:
        """A whole copy on the CPU holding `state_dict` (the sharded model's gathered weights), to `save` from."""


@runtime_checkable
class BackbonePolicy(TrainablePolicy, Protocol):
    """A policy whose model is a decoder backbone (`last_hidden_state`) and an lm-head, both reachable."""

    logprob_chunk: int
    """Positions per chunk when the lm-head scores hidden states (0: all at once)."""

    @abstractmethod
    def autocast(self) -> AbstractContextManager:
        """The autocast context of its forward passes (bf16 on CUDA when `bf16`, else none)."""

    @abstractmethod
    def backbone_and_head(self) -> tuple[torch.nn.Module, torch.nn.Module]:
        """(decoder backbone, lm-head): the backbone maps input ids to `last_hidden_state`, the head's `weight`
        [V, H] maps hidden states to logits; a value head or PRM reads the backbone's `config.hidden_size`."""

    @abstractmethod
    def training_backbone(self) -> torch.nn.Module:
        """The backbone to call for a forward pass: its data-parallel wrapper when set and gradients are on."""

    @abstractmethod
    def completion_hidden(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                          completion_start: int | torch.Tensor) -> torch.Tensor:
        """Hidden states [B, C, H] of the positions that predict each completion token (a value head's input)."""

    @abstractmethod
    def completion_outputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                           completion_start: int | torch.Tensor, temperature: float = 1.0,
                           entropy_grad: bool = False, select: torch.Tensor | None = None,
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log-probs, entropies, hidden states) of the completion tokens from one backbone pass; entropies
        carry gradients only with `entropy_grad`. With `select` [B, C] (bool: the tokens a loss reads), the
        lm-head scores those positions alone and the others read 0 (an episode's env turns, most of a
        multi-turn row, cost no lm-head pass)."""

    @abstractmethod
    def compile_layers(self, backend: str = "inductor") -> bool:
        """`torch.compile` the decoder layers in place (`torch_compile`); returns whether it compiled."""
