"""`ProcessRewardModel`: a causal-LM backbone with a scalar head that scores each reasoning step.

A step's score is sigmoid(head(h)), h the last hidden state at the step's LAST token (it has read the
question, the steps before and the whole step): the estimated chance that the solution so far leads
to a correct answer. It implements the `StepScorer` protocol (search/search_types.py) on episode
engine branches; the token ids it scores must come from its own tokenizer's vocabulary (a PRM made
`from_policy` shares the policy's).

A saved PRM is a Hugging Face folder of the backbone (loadable by AutoModel; AutoModelForCausalLM
loads it too, with the lm-head tied or newly initialised), its tokenizer, `prm_head.safetensors` and
`prm_config.json` (aggregation, system prompt, chat-template setting).
"""
from __future__ import annotations

import copy
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn

from lmgym.core.jsonl import read_json
from lmgym.core.messages import first_line
from lmgym.policies.base import BackbonePolicy
from lmgym.policies.hf import bf16_autocast, default_device
from lmgym.policies.loading.models import ModelLoadError, ModelNotFoundError, _corrupt_weights_error
from lmgym.policies.padded_passes import backbone_hidden, enable_activation_checkpointing
from lmgym.policies.prompting import Observation, pad_id, prompt_ids
from lmgym.policies.value import ValueHead

if TYPE_CHECKING:
    from lmgym.buffers import Trajectory


class StepTokens(Protocol):
    """What `score_branches` reads of a search branch (lmgym.episodes.engine.Branch has it): the prompt's token
    ids, the ids sampled so far, and where each step ends in them."""

    prompt_ids: list[int]
    ids: list[int]
    step_ends: list[int]

AGGREGATIONS = ("min", "last", "product", "mean")
HEAD_FILE = "prm_head.safetensors"
CONFIG_FILE = "prm_config.json"


def aggregate_step_scores(scores: Sequence[float], how: str = "min") -> float:
    """A solution's score from its step scores: their min, the last, the product or the mean (no steps: 0.0)."""
    if how not in AGGREGATIONS:
        raise ValueError(f"step score aggregation must be one of {', '.join(AGGREGATIONS)}; got {how!r}")
    values = [float(s) for s in scores]
    if not values:
        return 0.0
    if how == "min":
        return min(values)
    if how == "last":
        return values[-1]
    if how == "product":
        return math.prod(values)
    return sum(values) / len(values)


class ProcessRewardModel(nn.Module):
    """Backbone (a causal LM without its lm-head) + a float32 `ValueHead`, read at each step's last token.

    Args:
        backbone: the base model (e.g. `LlamaModel`), returning `last_hidden_state`.
        tokenizer: its tokenizer (the EOS token pads when it has no pad token).
        system_prompt: as for `HFPolicy`.
        use_chat_template: as for `HFPolicy` (with `system_prompt`, how an observation becomes a prompt).
        aggregation: how `solution_score` combines step scores (min | last | product | mean).
        name_or_path: the model it came from (recorded in run folders).
    """

    def __init__(self, backbone: nn.Module, tokenizer, system_prompt: str | None = None,
                 use_chat_template: bool = True, aggregation: str = "min", name_or_path: str | None = None):
        super().__init__()
        aggregate_step_scores([], aggregation)  # a bad aggregation fails here, not at the first score
        self.backbone = backbone
        self.head = ValueHead(backbone.config.hidden_size).to(next(backbone.parameters()).device)
        self.tokenizer = tokenizer
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.system_prompt = system_prompt
        self.use_chat_template = bool(use_chat_template) and getattr(tokenizer, "chat_template", None) is not None
        self.aggregation = aggregation
        self.name_or_path = name_or_path or getattr(backbone.config, "_name_or_path", "") or None
        self.bf16 = True  # bf16 autocast on CUDA; a Trainer sets it from its config
        self.eval()  # dropout off: training and scoring see the same function

    # ------------------------------------------------------------------ construction and persistence
    @classmethod
    def from_policy(cls, policy: BackbonePolicy, aggregation: str = "min") -> ProcessRewardModel:
        """A PRM on a copy of a policy's backbone (LoRA adapters merged in), with its tokenizer, system
        prompt and chat-template setting; the head starts at zero (every step scores 0.5)."""
        if getattr(policy, "is_lora", False):
            backbone = copy.deepcopy(policy.model).merge_and_unload().base_model
        else:
            backbone = copy.deepcopy(policy.backbone_and_head()[0])
        backbone.requires_grad_(True)
        return cls(backbone, policy.tokenizer, policy.system_prompt, policy.use_chat_template, aggregation,
                   name_or_path=policy.name_or_path).to(policy.device)

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str | torch.device | None = None) -> ProcessRewardModel:
        """Load a folder written by `save`; a missing or bad folder is one line (ModelNotFoundError or
        ModelLoadError) naming what is wrong."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file
        from transformers import AutoModel, AutoTokenizer

        folder = Path(path)
        if not folder.is_dir():
            raise ModelNotFoundError(f"no PRM folder at {folder}")
        for name in ("config.json", CONFIG_FILE, HEAD_FILE):
            if not (folder / name).is_file():
                raise ModelLoadError(f"{folder} is not a PRM folder (no {name}); ProcessRewardModel.save writes one")
        settings = _read_settings(folder / CONFIG_FILE)
        try:
            backbone = AutoModel.from_pretrained(str(folder), dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(str(folder))
            head_state = load_file(str(folder / HEAD_FILE))
        except SafetensorError as err:
            raise _corrupt_weights_error(folder, err) from None
        except (OSError, ValueError) as err:
            first = first_line(err)
            raise ModelLoadError(f"{folder}: cannot load the PRM ({first[:200]})") from None
        prm = cls(backbone, tokenizer, settings["system_prompt"], settings["use_chat_template"],
                  settings["aggregation"], name_or_path=str(folder))
        try:
            prm.head.load_state_dict(head_state)
        except RuntimeError as err:
            raise ModelLoadError(f"{folder / HEAD_FILE}: does not fit the backbone "
                                 f"({str(err).splitlines()[-1].strip()[:200]})") from None
        return prm.to(torch.device(device) if device is not None else default_device())

    def save(self, directory: str | Path, generation: dict | None = None, merged: bool = False) -> None:
        """Write the PRM folder: the backbone (safetensors) with its config, the tokenizer and chat template,
        `prm_head.safetensors` and `prm_config.json`.

        generation: must be None or empty (a PRM does not generate; the Trainer passes its
        `generation_settings()`, None here). merged: accepted for the Trainer's model-folder writer; a PRM
        holds no adapters, so its weights are always saved whole.
        """
        from safetensors.torch import save_file

        if generation:
            raise ValueError("ProcessRewardModel.save: a PRM does not generate; it takes no generation settings")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(str(directory), safe_serialization=True)
        self.tokenizer.save_pretrained(str(directory))
        if self.tokenizer.chat_template is not None and not (directory / "chat_template.jinja").is_file():
            (directory / "chat_template.jinja").write_text(self.tokenizer.chat_template, encoding="utf-8")
        save_file({k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()},
                  str(directory / HEAD_FILE))
        settings = {"aggregation": self.aggregation, "system_prompt": self.system_prompt,
                    "use_chat_template": self.use_chat_template}
        (directory / CONFIG_FILE).write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")

    # ------------------------------------------------------------------ what the Trainer reads
    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def enable_gradient_checkpointing(self) -> None:
        """Checkpoint the backbone's decoder layers in training passes (policies/padded_passes.py); the
        Trainer calls it for `TrainerConfig.gradient_checkpointing`."""
        enable_activation_checkpointing(self.backbone)

    def autocast(self):
        """bf16 autocast on CUDA (when `bf16`), a no-op elsewhere."""
        return bf16_autocast(self.device, self.bf16)

    # ------------------------------------------------------------------ encoding
    def format_prompt(self, observation: Observation) -> list[int]:
        """Prompt token ids of an observation, as the policy it came from builds them."""
        return prompt_ids(self.tokenizer, observation, self.system_prompt, self.use_chat_template)

    def encode_text(self, text: str) -> list[int]:
        """Token ids of a text fragment (no special tokens)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def encode_steps(self, question: str, steps: Sequence[str]) -> tuple[list[int], list[int]]:
        """(ids, positions): the prompt of `question` followed by each step encoded on its own, as the episode
        engine builds a branch; positions index each step's last token in ids. An empty step is a ValueError."""
        ids = self.format_prompt(question)
        positions = []
        for i, step in enumerate(steps):
            step_ids = self.encode_text(step)
            if not step_ids:
                raise ValueError(f"step {i} is empty ({step!r}): a step needs at least one token to be scored")
            ids += step_ids
            positions.append(len(ids) - 1)
        return ids, positions

    # ------------------------------------------------------------------ scoring
    def step_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor
                    ) -> torch.Tensor:
        """Head logits [B, S] at `positions` [B, S] (each step's last token; -1 pads, giving 0.0) of right-padded
        rows `input_ids` [B, L]; with gradients when enabled. Float32."""
        with self.autocast():  # padding without a [batch, query, key] mask
            hidden = backbone_hidden(self.backbone, input_ids, attention_mask)
        index = positions.clamp(min=0).unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
        logits = self.head(hidden.gather(1, index))
        return logits.masked_fill(positions < 0, 0.0)

    def step_batch(self, sequences: Sequence[Sequence[int]], step_positions: Sequence[Sequence[int]]
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input_ids, attention_mask, positions) tensors for `step_logits`: rows right-padded with the pad
        token, positions with -1. A position outside its sequence is a ValueError."""
        if len(sequences) != len(step_positions):
            raise ValueError(f"{len(sequences)} sequences but {len(step_positions)} lists of step positions")
        for k, (seq, positions) in enumerate(zip(sequences, step_positions)):
            bad = [p for p in positions if not 0 <= p < len(seq)]
            if bad:
                raise ValueError(f"sequence {k}: step position {bad[0]} is outside its {len(seq)} tokens")
        width = max((len(s) for s in sequences), default=1)
        steps = max(1, max((len(p) for p in step_positions), default=1))
        pad = pad_id(self.tokenizer)
        ids = torch.tensor([list(s) + [pad] * (width - len(s)) for s in sequences], dtype=torch.long)
        mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences], dtype=torch.long)
        positions = torch.tensor([list(p) + [-1] * (steps - len(p)) for p in step_positions], dtype=torch.long)
        return ids.to(self.device), mask.to(self.device), positions.to(self.device)

    @torch.no_grad()
    def sequence_logits(self, sequences: Sequence[Sequence[int]], step_positions: Sequence[Sequence[int]],
                        batch_size: int = 16) -> list[list[float]]:
        """Head logits of each sequence's steps (no gradients), `batch_size` sequences per forward pass
        (sorted by length to pad little); results in the input order."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        order = sorted(range(len(sequences)), key=lambda k: len(sequences[k]), reverse=True)
        results: list[list[float]] = [[] for _ in sequences]
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            rows = self.step_batch([sequences[k] for k in chunk], [step_positions[k] for k in chunk])
            logits = self.step_logits(*rows)
            for row, k in zip(logits.float().cpu().tolist(), chunk):
                results[k] = row[:len(step_positions[k])]
        return results

    def score_sequences(self, sequences: list[list[int]], step_positions: list[list[int]], batch_size: int = 16
                        ) -> list[list[float]]:
        """Step scores in (0, 1) (sigmoid of the head) at `step_positions` of each token sequence; no gradients."""
        return [[1.0 / (1.0 + math.exp(-x)) for x in row]
                for row in self.sequence_logits(sequences, step_positions, batch_size)]

    def score_branches(self, branches: Sequence[StepTokens]) -> list[list[float]]:
        """StepScorer: one score per step taken by each engine branch (prompt_ids + ids, at step_ends)."""
        return self.score_sequences([b.prompt_ids + b.ids for b in branches],
                                    [[len(b.prompt_ids) + e for e in b.step_ends] for b in branches])

    def score_trajectories(self, trajectories: Sequence[Trajectory]) -> list[list[float]]:
        """One score per step of each trajectory (prompt_ids + completion_ids, at step_ends)."""
        return self.score_sequences([list(t.prompt_ids) + list(t.completion_ids) for t in trajectories],
                                    [[len(t.prompt_ids) + e for e in t.step_ends] for t in trajectories])

    def score_steps(self, question: str, steps: Sequence[str]) -> list[float]:
        """Scores of text steps under `question` (encoded by `encode_steps`)."""
        ids, positions = self.encode_steps(question, steps)
        return self.score_sequences([ids], [positions])[0]

    def solution_score(self, step_scores: Sequence[float]) -> float:
        """A solution's score from its step scores, by this PRM's `aggregation`."""
        return aggregate_step_scores(step_scores, self.aggregation)


def _read_settings(path: Path) -> dict:
    """prm_config.json's aggregation, system prompt and chat-template setting, checked (ModelLoadError)."""
    try:
        settings = read_json(path)
    except ValueError as err:  # "<path>:<line>: <problem>" (core/jsonl.py)
        raise ModelLoadError(str(err)[:300]) from None
    if not isinstance(settings, dict):
        raise ModelLoadError(f"{path}: expected a JSON object, got {type(settings).__name__}")
    checks = {"aggregation": lambda v: v in AGGREGATIONS, "system_prompt": lambda v: v is None or isinstance(v, str),
              "use_chat_template": lambda v: isinstance(v, bool)}
    for name, ok in checks.items():
        if name not in settings or not ok(settings[name]):
            raise ModelLoadError(f"{path}: bad or missing {name!r} ({settings.get(name)!r})")
    return settings
