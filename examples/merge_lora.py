"""Merge a LoRA adapter into its base model: an adapter folder (what `HFPolicy.save` writes for a LoRA
policy, e.g. a run's model/adapter) -> a Hugging Face model folder that `AutoModelForCausalLM.from_pretrained`,
`pipeline("text-generation")` and `HFPolicy(folder)` load without peft.

    python examples/merge_lora.py runs/rag_grpo/model/adapter runs/rag_grpo/merged
    python examples/merge_lora.py ADAPTER OUTPUT --base_model HuggingFaceTB/SmolLM2-135M-Instruct --dtype bfloat16

The base is the model the adapter records (`base_model_name_or_path` in adapter_config.json: a hub name,
a local folder or the embedded model), or --base_model. The weights are W + (alpha / r) * B A, computed
by peft's `merge_and_unload`. The tokenizer, chat template, system prompt and generation config saved
next to the adapter come along (the base's tokenizer when the adapter folder has none). The output is
written beside its final place and renamed into it; an existing output folder is refused unless --overwrite.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from common import example_parser  # noqa: E402

from lmgym.core.atomic_io import refuse_symlink, remove_tree  # noqa: E402
from lmgym.core.jsonl import read_json  # noqa: E402
from lmgym.policies.loading.models import ADAPTER_CONFIG, load_model_and_tokenizer  # noqa: E402
from lmgym.training.cli import run_with_clear_errors  # noqa: E402

DTYPES = ("float32", "bfloat16", "float16")
# files of an adapter folder that are not carried over: the adapter itself and peft's model card
ADAPTER_FILES = (ADAPTER_CONFIG, "adapter_model.safetensors", "adapter_model.bin", "README.md")


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("adapter", help="LoRA adapter folder (adapter_config.json + adapter weights)")
    parser.add_argument("output", help="the merged model folder to write")
    parser.add_argument("--base_model", default=None,
                        help="base model (hub name, local folder, 'embedded'); default: the one the adapter records")
    parser.add_argument("--dtype", choices=DTYPES, default="float32",
                        help="dtype of the merge and the saved weights (default float32: no rounding)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    return parser


def recorded_base(adapter: Path) -> str:
    """The base model named in the adapter's config; one-line errors for a folder that is not an adapter."""
    config = adapter / ADAPTER_CONFIG
    if not config.is_file():
        raise FileNotFoundError(f"{adapter} is not a LoRA adapter folder (no {ADAPTER_CONFIG})")
    try:
        base = read_json(config).get("base_model_name_or_path")  # any unreadable file: one ValueError
    except (ValueError, AttributeError):
        raise ValueError(f"{config}: unreadable adapter config") from None
    if not base:
        raise ValueError(f"{config} names no base model: pass --base_model")
    return base


def merge(adapter: str | Path, output: str | Path, base_model: str | None = None, dtype: str = "float32",
          overwrite: bool = False) -> Path:
    """Write `adapter` merged into its base (or `base_model`) as a model folder at `output`; returns it."""
    import torch
    from peft import PeftModel
    from transformers import AutoTokenizer

    adapter, output = Path(adapter), Path(output)
    base_name = base_model or recorded_base(adapter)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    refuse_symlink(output, "the output folder")  # replacing the link would move the model away from its target
    if output.exists() and not overwrite and (not output.is_dir() or any(output.iterdir())):
        raise ValueError(f"{output} already exists: pass --overwrite to replace it, or another folder")
    base, tokenizer = load_model_and_tokenizer(base_name, dtype=getattr(torch, dtype), device="cpu")
    merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
    if any(adapter.glob("tokenizer*")):
        tokenizer = AutoTokenizer.from_pretrained(str(adapter))
    aside = output.with_name(f".tmp-{output.name}")
    remove_tree(aside)  # a leftover of a killed merge; a link there is unlinked alone
    merged.save_pretrained(str(aside), safe_serialization=True)
    tokenizer.save_pretrained(str(aside))
    for item in adapter.iterdir():  # chat template, system prompt, generation config as the adapter has them
        if item.is_file() and item.name not in ADAPTER_FILES:
            shutil.copy2(item, aside / item.name)
    remove_tree(output)
    aside.rename(output)
    return output


def run(args: argparse.Namespace) -> None:
    folder = merge(args.adapter, args.output, args.base_model, args.dtype, args.overwrite)
    print(f"merged {args.adapter} into {args.base_model or recorded_base(Path(args.adapter))}: {folder}")


def main(argv: list[str] | None = None) -> None:
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


if __name__ == "__main__":
    main()
