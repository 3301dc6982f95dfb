"""`HFPolicy`: any Hugging Face causal LM (hub name, local path, or the embedded default) as a policy.

The Inductor options of the training layers' `torch.compile` (`HFPolicy.compile_layers`, `inductor_options`).

Every micro-batch has its own length, so the layers are compiled with symbolic shapes. Inductor still
specialises some decisions on the sizes and guards them; crossing such a guard mid-run recompiles every
layer's code (5-7 s a step for W1's 135M model on an H100, several times a run). One of them is the
mix-order reduction fusion (the norms' backward), which Inductor applies only above 5 Mi elements unless its
non-strict mode is on: on, the fusion is chosen whatever the size, and no guard is made. Inductor's own note
on that option says it helps avoid recompilations. Options this torch does not have are left out.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from lmgym.policies.base import BackbonePolicy, DataParallelPolicy
from lmgym.policies.compiled_layers import compile_decoder_layers, take_over_checkpointing
from lmgym.policies.decoding.continuous import OnActions, play, play_columns
from lmgym.policies.decoding.fast import FastDecoder, supports_fast_decode
from lmgym.policies.decoding.generation import RowKeys, StopLists, decode, stop_lists
from lmgym.policies.decoding.step import FORCED_TOKENS
from lmgym.policies.loading.hub import check_repo_id, push_folder, recorded_base
from lmgym.policies.loading.lora_config import LoraSettings, peft_lora_config, wants_4bit
from lmgym.policies.loading.model_card import write_model_card
from lmgym.policies.loading.models import EMBEDDED_ALIASES, EMBEDDED_MODEL, SYSTEM_PROMPT_FILE, load_model_and_tokenizer
from lmgym.policies.loading.pretrained_files import pretrained_files
from lmgym.policies.loading.quantization import four_bit_config, prepare_for_adapters
from lmgym.policies.loading.unsharded import unsharded_copy
from lmgym.policies.logprobs import (
    chunked_token_logprobs,
    completion_hidden_states,
    completion_targets,
    scatter_selected,
)
from lmgym.policies.padded_passes import backbone_hidden, enable_activation_checkpointing
from lmgym.policies.prompting import Observation, is_observation, prompt_ids
from lmgym.policies.reference_adapter import REFERENCE_ADAPTER

if TYPE_CHECKING:
    from peft import LoraConfig

WANTED = {"triton.mix_order_reduction_non_strict_mode": True}  # Inductor options (module docstring)


def cast_linear_weights(module: torch.nn.Module, dtype: torch.dtype) -> None:
    """Store the weights of `module`'s linear layers in `dtype` (a frozen model scored under autocast to that
    dtype: autocast casts them so at every pass, so the results are the same, without the casts and in
    half the memory). Embeddings, norms and the residual stream keep their dtype."""
    for sub in module.modules():
        if isinstance(sub, torch.nn.Linear):
            sub.to(dtype)


def default_device() -> torch.device:
    """cuda:LOCAL_RANK (this torchrun rank's GPU; cuda:0 otherwise) when CUDA is available, else the CPU."""
    import os

    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return torch.device("cpu")


def bf16_autocast(device: torch.device, bf16: bool) -> torch.autocast:
    """bf16 autocast on a CUDA `device` when `bf16`, a no-op autocast otherwise."""
    if device.type == "cuda" and bf16:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def inductor_options() -> dict[str, object] | None:
    """The options of WANTED this torch's Inductor knows (None when it knows none of them)."""
    try:
        from torch._inductor import config
    except ImportError:  # a torch without Inductor: the caller compiles with the backend's defaults
        return None
    known = {}
    for name, value in WANTED.items():
        section, _, leaf = name.rpartition(".")
        holder = getattr(config, section, None) if section else config
        if holder is not None and hasattr(holder, leaf):
            known[name] = value
    return known or None


class HFPolicy(BackbonePolicy, DataParallelPolicy):
    """Wraps an `AutoModelForCausalLM` and its tokenizer; implements every protocol of policies/base.py.

    Args:
        model: a model name or path (str), or an already built model (then pass `tokenizer`). A folder
            written by `save` loads back whole: full weights, or a LoRA adapter over its recorded base.
        tokenizer: required when `model` is an object.
        system_prompt: system message for the chat template (None: the one saved in the model folder by
            `save`, if any, else the template's default).
        use_chat_template: False feeds observations as raw text (base models, few-shot prompts).
        lora: LoraSettings, or a `peft.LoraConfig` used as given, to train adapters only (LoraSettings with
            `load_in_4bit`: QLoRA, a 4-bit base, needs bitsandbytes); the reference model is then the adapter-free
            base, or a re-synced reference adapter.
        gradient_checkpointing: recompute each decoder layer's activations in the backward pass instead of
            keeping them (policies/padded_passes.py); `TrainerConfig.gradient_checkpointing` turns it on too.
        dtype: parameter dtype; default float32 (bf16 autocast is applied by the trainer on GPU).
        logprob_chunk: positions per chunk when scoring completions (0: no chunking).
        fast_decode: sample with the static-cache decoder (CUDA graphs on GPU); None = on CUDA when the
            architecture supports it. The plain loop (generation.decode) is used otherwise.
    """

    def __init__(
        self,
        model: str | torch.nn.Module = EMBEDDED_MODEL,
        tokenizer=None,
        system_prompt: str | None = None,
        use_chat_template: bool = True,
        lora: LoraSettings | LoraConfig | None = None,
        gradient_checkpointing: bool = False,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device | None = None,
        logprob_chunk: int = 64,
        fast_decode: bool | None = None,
    ):
        self.device = torch.device(device) if device is not None else default_device()
        quantization = None
        peft_config = peft_lora_config(lora) if lora is not None else None  # a wrong type: one line, first
        if wants_4bit(lora):
            if not isinstance(model, str):
                raise ValueError("HFPolicy: lora.load_in_4bit loads the base itself: pass a model name or path")
            quantization = four_bit_config(torch.bfloat16 if self.device.type == "cuda" else torch.float32)
        if isinstance(model, str):
            self.name_or_path = EMBEDDED_MODEL if model in EMBEDDED_ALIASES else model
            if system_prompt is None and (Path(model) / SYSTEM_PROMPT_FILE).is_file():
                system_prompt = (Path(model) / SYSTEM_PROMPT_FILE).read_text(encoding="utf-8")
            model, tokenizer = load_model_and_tokenizer(model, dtype=dtype, device=self.device,
                                                        quantization_config=quantization)
        elif tokenizer is None:
            raise ValueError("HFPolicy: pass `tokenizer` together with a model object")
        else:
            self.name_or_path = getattr(getattr(model, "config", None), "_name_or_path", "") or None
        self.model = model if quantization is not None else model.to(self.device)  # 4-bit: placed as loaded
        self.tokenizer = tokenizer
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.system_prompt = system_prompt
        self.use_chat_template = use_chat_template and getattr(tokenizer, "chat_template", None) is not None
        self.logprob_chunk = logprob_chunk
        self.bf16 = True  # bf16 autocast on CUDA; the trainer sets it from its config
        self.on_tokens = None  # progress hook: called with the number of tokens sampled since its last call
        self.cancelled_rows = None  # cancel hook: asked at each decoding step which rows (prompt i's sample j is
        # row i * n + j) nobody waits for; they end there, finish_reason "cancelled" (the server's timed-out requests)
        self._parallel_backbone: torch.nn.Module | None = None  # a DDP wrapper of the backbone (training passes)
        # FSDP: the layers gathered to sample
        self._sampling_weights: Callable[[], AbstractContextManager] | None = None
        self.is_lora = lora is not None or hasattr(self.model, "peft_config")
        # the base an adapter saved from this policy names: a loaded adapter keeps the one it recorded
        self.base_name_or_path = (next(iter(self.model.peft_config.values())).base_model_name_or_path
                                  if hasattr(self.model, "peft_config") else self.name_or_path)
        if lora is not None and hasattr(self.model, "peft_config"):
            raise ValueError("HFPolicy: the model already has LoRA adapters (a saved adapter folder); drop `lora=`")
        if lora is not None:
            from peft import get_peft_model

            if quantization is not None:  # checkpointing, if any, is set below

                self.model = prepare_for_adapters(self.model, dtype)

            self.model = get_peft_model(self.model, peft_config)
        self.quantized, self.gradient_checkpointing = quantization is not None, False
        if gradient_checkpointing:
            self.enable_gradient_checkpointing()
        self.model.eval()  # dropout off: sampling and scoring must see the same function

        if fast_decode is None:
            fast_decode = self.device.type == "cuda" and supports_fast_decode(self.model)
        self.fast_decoder = FastDecoder(self.model) if fast_decode else None

    # ------------------------------------------------------------------ prompting
    def format_prompt(self, observation: Observation) -> list[int]:
        return prompt_ids(self.tokenizer, observation, self.system_prompt, self.use_chat_template)

    # ------------------------------------------------------------------ sampling
    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        """`Policy.sample`; `prompts` are token ids (`format_prompt`'s) or, all of them, observations (text
        or chat messages), which are formatted with `format_prompt` first (the first prompt decides)."""
        if prompts and is_observation(prompts[0]):
            prompts = [self.format_prompt(p) for p in prompts]
        expanded = [p for p in prompts for _ in range(n)]
        stop = [s for s in stop_lists(stop, len(prompts)) for _ in range(n)]  # one list per sampled row
        if isinstance(generator, RowKeys) and n > 1:
            generator = generator.repeat(n)
        with self._sampling():
            if self.fast_decoder is not None:
                flat = self.fast_decoder.generate(self.tokenizer, expanded, max_new_tokens, temperature, top_p,
                                                  stop, generator, on_tokens=self.on_tokens,
                                                  cancelled_rows=self.cancelled_rows)
            else:
                flat = decode(self.model, self.tokenizer, expanded, max_new_tokens, temperature, top_p, stop,
                              generator, on_tokens=self.on_tokens, cancelled_rows=self.cancelled_rows)
        return [flat[i * n:(i + 1) * n] for i in range(len(prompts))]

    @property
    def can_play(self) -> bool:
        """Whether `play` can run: episodes go on inside the fast decoder (policies/decoding/continuous.py)."""
        return self.fast_decoder is not None

    def play(self, prompts: list[list[int]], max_new_tokens: int, actions: int, temperature: float, top_p: float,
             stop: StopLists, generator: torch.Generator | RowKeys | None, on_actions: OnActions,
             injected: int = FORCED_TOKENS) -> None:
        """Play episodes from token-id `prompts` in one fast-decoder call, with room for `actions` actions of at
        most `max_new_tokens` each, each followed by an env turn of at most `injected` tokens (a longer one ends its
        row's part in the call; policies/decoding/extension.py feeds those over FORCED_TOKENS): `on_actions` hears
        of the actions that ended at each host sync and answers how each episode goes on (continuous.py)."""
        if self.fast_decoder is None:
            raise ValueError("HFPolicy.play needs the fast decoder (a CUDA device and a Llama-family model)")
        columns = play_columns(max_new_tokens, actions, self.fast_decoder.sync_every, injected)
        with self._sampling():
            play(self.fast_decoder, self.tokenizer, prompts, max_new_tokens, columns, temperature, top_p, stop,
                 generator, on_actions, fed_turn_tokens=injected)

    @contextmanager
    def _sampling(self) -> Iterator[None]:
        """Eval mode, the KV cache on, autocast and the sampling weights' context, for the duration."""
        was_training = self.model.training
        self.model.eval()
        use_cache = getattr(self.model.config, "use_cache", True)
        self.model.config.use_cache = True
        weights = self._sampling_weights
        try:
            with self.autocast(), (weights() if weights is not None else nullcontext()):
                yield
        finally:
            self.model.config.use_cache = use_cache
            self.model.train(was_training)

    def generate_text(self, observations: list[Observation], max_new_tokens: int = 256, **kwargs) -> list[str]:
        """Convenience: greedy (default) completions for observations (text or chat messages)."""
        kwargs.setdefault("temperature", 0.0)
        prompts = [self.format_prompt(o) for o in observations]
        return [g[0].text for g in self.sample(prompts, 1, max_new_tokens, **kwargs)]

    # ------------------------------------------------------------------ scoring
    def autocast(self):
        """bf16 autocast on CUDA, a no-op elsewhere."""
        return bf16_autocast(self.device, self.bf16)

    def enable_gradient_checkpointing(self) -> None:
        """Checkpoint each decoder layer's activations in training passes (policies/padded_passes.py); the
        trainer calls it for `TrainerConfig.gradient_checkpointing`. Passes without gradients are unchanged.
        Compiled layers checkpoint inside their compiled code (policies/compiled_layers.py)."""
        enable_activation_checkpointing(self.model)
        take_over_checkpointing(self.model.modules())
        self.gradient_checkpointing = True

    def compile_layers(self, backend: str = "inductor") -> bool:
        """`torch.compile` each decoder layer in place (regional compilation: the layers share code, so
        one compilation, with symbolic batch and length, serves them all); the sampling
        path has its own (policies/decoding/fast.py). With gradient checkpointing the compiled layer holds
        the checkpoint, and the compiler its recomputation (policies/compiled_layers.py). Each call compiles
        anew, with caches of its own. Not with a 4-bit base; returns whether it compiled."""
        backbone = self.backbone_and_head()[0]
        layers = getattr(backbone, "layers", None)
        if layers is None or self.quantized:
            return False
        compile_decoder_layers(layers, backend, inductor_options() if backend == "inductor" else None)
        return True

    def backbone_and_head(self) -> tuple[torch.nn.Module, torch.nn.Module]:
        """(decoder backbone, lm-head) of the model (under LoRA: of peft's wrapped base, adapters included)."""
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        return base.model, base.lm_head

    def data_parallel_module(self) -> torch.nn.Module:
        """The module every training forward pass runs through: the decoder backbone (LoRA layers included;
        the lm-head, used as a weight, outside unless tied to the input embeddings)."""
        return self.backbone_and_head()[0]

    def use_data_parallel(self, wrapper: torch.nn.Module | None) -> None:
        """Run grad-enabled backbone passes through `wrapper` (DDP around `data_parallel_module()`, so its
        gradient hooks fire); passes without gradients (sampling, references, evaluation) stay direct."""
        self._parallel_backbone = wrapper

    def use_sampling_weights(self, context: Callable[[], AbstractContextManager] | None) -> None:
        """Sample inside `context()` (FSDP: the sharded layers gathered whole for the whole decode)."""
        self._sampling_weights = context

    def training_backbone(self) -> torch.nn.Module:
        """The backbone to call for a forward pass: the data-parallel wrapper when set and gradients are on."""
        wrapper = self._parallel_backbone
        return wrapper if wrapper is not None and torch.is_grad_enabled() else self.backbone_and_head()[0]

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0, entropy_grad=False):
        logprobs, entropy, _ = self.completion_outputs(input_ids, attention_mask, completion_start, temperature,
                                                       entropy_grad)
        return logprobs, entropy

    def completion_hidden(self, input_ids, attention_mask, completion_start):
        """Last hidden states [B, C, H] of the positions that predict each completion token (the state
        before token t is generated: a value head's input)."""
        with self.autocast():  # padding without a [batch, query, key] mask (policies/padded_passes.py)
            hidden = backbone_hidden(self.training_backbone(), input_ids, attention_mask)
        return completion_hidden_states(hidden, completion_start)

    def completion_outputs(self, input_ids, attention_mask, completion_start, temperature=1.0, entropy_grad=False,
                           select=None):
        """(log-probs, entropies, hidden states) of the completion tokens from one backbone pass; with `select`
        [B, C] (bool), the lm-head scores the selected positions alone and the others read 0."""
        _, head = self.backbone_and_head()
        h = self.completion_hidden(input_ids, attention_mask, completion_start)
        with self.autocast():
            targets = completion_targets(input_ids, completion_start)
            if select is None:
                logprobs, entropy = chunked_token_logprobs(h, head.weight, targets, temperature, self.logprob_chunk,
                                                           entropy_grad)
            else:
                # one packed row: a chunk holds as many tokens as a chunk of the unpacked rows would
                logprobs, entropy = scatter_selected(select, *chunked_token_logprobs(
                    h[select].unsqueeze(0), head.weight, targets[select].unsqueeze(0), temperature,
                    self.logprob_chunk * select.shape[0], entropy_grad))
        return logprobs, entropy, h

    # ------------------------------------------------------------------ reference and persistence
    def frozen_copy(self) -> HFPolicy:
        """A frozen copy (the KL reference). For LoRA policies the reference shares the model: the base until
        a re-sync, then a reference adapter (policies/reference_adapter.py)."""
        if self.is_lora:
            return self.with_model(self.model)  # callers use `reference_context()` to disable the adapters
        model = copy.deepcopy(self.model)
        model.requires_grad_(False)
        model.eval()
        ref = self.with_model(model)
        if self.device.type == "cuda" and self.bf16:
            cast_linear_weights(ref.backbone_and_head()[0], torch.bfloat16)  # the copy's own model
        return ref

    def with_model(self, model: torch.nn.Module, device: str | torch.device | None = None) -> HFPolicy:
        """A shallow copy of this policy (tokenizer, prompting, settings) around `model` on `device` (default:
        this policy's), without what computes with this policy's own model: its fast decoder, data-parallel
        wrapper and sampling context."""
        twin = copy.copy(self)
        twin.model = model
        twin.device = self.device if device is None else torch.device(device)
        twin.fast_decoder = None
        twin._parallel_backbone = None
        twin._sampling_weights = None
        return twin

    def unsharded_copy(self, state_dict: dict[str, torch.Tensor]) -> HFPolicy:
        """A whole CPU copy holding `state_dict`, the gathered weights of this FSDP-sharded policy, to `save`
        from (policies/loading/unsharded.py)."""
        return unsharded_copy(self, state_dict)

    @contextmanager
    def plain_decoding(self) -> Iterator[None]:
        """Sample with the plain decode loop inside (e.g. while another LoRA adapter is active: a CUDA graph
        captured with one adapter would keep computing with it)."""
        fast, self.fast_decoder = self.fast_decoder, None
        try:
            yield
        finally:
            self.fast_decoder = fast

    def parameters(self) -> list[torch.Tensor]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def save(self, directory: str | Path, generation: dict | None = None, merged: bool = False) -> None:
        """Save a Hugging Face model folder: weights (safetensors; a LoRA policy saves its adapter, or with
        `merged` the base with the adapter merged in), tokenizer with its chat template, the system
        prompt (`system_prompt.txt`) and a generation config (`generation` overrides its fields).

        `AutoModelForCausalLM.from_pretrained`, `pipeline("text-generation")` and `HFPolicy(directory)`
        load it. An adapter records this policy's model name as its base (a hub id; the embedded model's
        is `HuggingFaceTB/SmolLM2-135M-Instruct`; a local folder as given), never the local cache folder it
        was loaded from. `README.md` is a model card (policies/loading/model_card.py) naming the base model.
        """
        directory = Path(directory)
        model = self.model
        if self.is_lora and merged:
            model = copy.deepcopy(self.model).merge_and_unload()
        elif self.is_lora:
            for peft_config in model.peft_config.values():
                peft_config.base_model_name_or_path = recorded_base(self.base_name_or_path)
        options = {}
        if self.is_lora and not merged:  # the KL reference's adapter is the trainer's, never the model's
            options = {"save_embedding_layers": False,
                       "selected_adapters": [n for n in model.peft_config if n != REFERENCE_ADAPTER]}
        try:
            model.save_pretrained(str(directory), safe_serialization=True, **options)
        finally:  # in memory the toolkit's own name stays (the embedded alias loads offline)
            if self.is_lora and not merged:
                for peft_config in model.peft_config.values():
                    peft_config.base_model_name_or_path = self.base_name_or_path
        write_model_card(directory, self.base_name_or_path, adapter=self.is_lora and not merged)
        self.tokenizer.save_pretrained(str(directory))
        if self.tokenizer.chat_template is not None and not (directory / "chat_template.jinja").is_file():
            (directory / "chat_template.jinja").write_text(self.tokenizer.chat_template, encoding="utf-8")
        if self.system_prompt:
            (directory / SYSTEM_PROMPT_FILE).write_text(self.system_prompt, encoding="utf-8")
        self.generation_config(**(generation or {})).save_pretrained(str(directory))

    def push_to_hub(self, repo_id: str, *, hub_api=None, private: bool | None = None, token: str | None = None,
                    merged: bool = False, generation: dict | None = None,
                    commit_message: str = "Upload model trained with lmgym"):
        """`save` into a temporary folder and upload it as the hub model repo `repo_id` (created if missing)
        through `huggingface_hub.HfApi` (`hub_api`: any object with its create_repo and upload_folder).
        Returns what upload_folder returns."""
        import tempfile

        check_repo_id(repo_id)
        with tempfile.TemporaryDirectory(prefix="rlgym-push-") as tmp:
            folder = Path(tmp) / repo_id.rpartition("/")[2]
            self.save(folder, generation=generation, merged=merged)
            write_model_card(folder, self.base_name_or_path, adapter=self.is_lora and not merged, repo_id=repo_id)
            return push_folder(folder, repo_id, hub_api=hub_api, private=private, token=token,
                               commit_message=commit_message)

    def pretrained_files(self) -> dict[str, Callable[[Path], None]]:
        """Writers of the files that make a training checkpoint of this policy load the Hugging Face way
        (config.json and generation_config.json; under LoRA the adapter as peft saves it):
        policies/loading/pretrained_files.py."""
        return pretrained_files(self)

    def generation_config(self, **fields):
        """A `transformers.GenerationConfig` with this tokenizer's eos/pad ids and the given fields."""
        from transformers import GenerationConfig

        base = getattr(self.model, "generation_config", None)
        values = base.to_dict() if base is not None else {}
        values.update(eos_token_id=self.tokenizer.eos_token_id, pad_token_id=self.tokenizer.pad_token_id)
        values.update(fields)
        if not values.get("do_sample"):  # sampling-only fields would make a greedy config invalid
            for name in ("temperature", "top_p", "top_k", "min_p", "typical_p"):
                values.pop(name, None)
        return GenerationConfig(**{k: v for k, v in values.items() if not k.startswith("_")})

    def state_dict(self) -> dict:
        return {k: v for k, v in self.model.state_dict().items()}

    def load_state_dict(self, state_dict: dict) -> None:
        self.model.load_state_dict(state_dict)
