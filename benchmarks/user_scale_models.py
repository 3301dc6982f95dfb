"""What the user-scale workloads W2 and W3 share on both sides: model folders of real shapes built in code,
the workloads' settings, prompts and reward, and the measurement (each phase's seconds and peak memory, the
memory breakdown), so that this toolkit's side (benchmarks/user_scale.py) and TRL's
(benchmarks/trl_user_scale_baseline.py) are set up and measured by the same code. Importing it loads torch
alone (TRL's process imports nothing of the toolkit; building a folder borrows
`lmgym.policies.loading.models.build_once`).

Shapes (`SHAPES`): "w2" is Qwen2.5-1.5B's (Qwen2ForCausalLM: 28 layers, hidden 1536, 12 query / 2 key-value
heads, vocabulary 151,936, tied embeddings; 1,543,714,304 parameters), "w3" Llama-3.1-8B's (LlamaForCausalLM:
32 layers, hidden 4096, 32 / 8 heads, vocabulary 128,256, llama3 RoPE scaling; 8,030,261,248 parameters);
"tiny-w2" and "tiny-w3" are the same architectures, chat formats and token layout scaled down for CPU tests.

A folder holds random weights (seeded, the architecture's own initialisation, stored in bf16) and a fast
byte-level BPE tokenizer of exactly the vocabulary size, built in code: the 256 byte symbols, then merges of
printable-ASCII pairs and triples in a fixed order until the vocabulary is full (about two characters a
token on English text, where a trained BPE takes about four), then the chat format's special tokens as the
last ids (ChatML for w2, Llama 3's headers for w3). Both this toolkit (`HFPolicy(folder)`) and TRL load the
same folder. Random weights put about 1/vocabulary of the probability on the end-of-sequence token, so
nearly every completion runs to the length limit on both sides: the work per step is fixed.

The model is initialised on the GPU when there is one (no float32 copy of 8B parameters on the host), in
bf16, and written with `save_pretrained`. Build a folder (once; a complete folder is reused):

    python benchmarks/user_scale_models.py w2 /tmp/w2_model [--seed 0] [--device cuda]
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import string
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

MARKER = "user_scale_shape.json"  # written beside config.json: which shape and seed the folder holds
SYSTEM_PROMPT = "Solve the math word problem step by step. End with '#### <number>'."


@dataclass(frozen=True)
class ChatFormat:
    """A chat template and the special tokens it uses (appended after the BPE vocabulary, in this order)."""

    specials: tuple[str, ...]
    eos: str
    pad: str
    bos: str | None
    template: str


CHATML = ChatFormat(
    specials=("<|endoftext|>", "<|im_start|>", "<|im_end|>"), eos="<|im_end|>", pad="<|endoftext|>", bos=None,
    template=("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"))
LLAMA3 = ChatFormat(
    specials=("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
              "<|finetune_right_pad_id|>"),
    eos="<|eot_id|>", pad="<|finetune_right_pad_id|>", bos="<|begin_of_text|>",
    template=("<|begin_of_text|>{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
              "{{ m['content'] }}<|eot_id|>{% endfor %}"
              "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"))


@dataclass(frozen=True)
class Shape:
    """A model shape: the transformers config class (by model type), its fields, and the chat format."""

    model_type: str              # "qwen2" | "llama"
    fields: dict[str, Any] = field(hash=False)
    chat: ChatFormat = CHATML

    @property
    def vocab_size(self) -> int:
        return self.fields["vocab_size"]


_QWEN25_15B = dict(vocab_size=151_936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                   num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=32_768, rms_norm_eps=1e-6,
                   rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0}, tie_word_embeddings=True,
                   use_sliding_window=False, max_window_layers=28, hidden_act="silu", initializer_range=0.02)
_LLAMA31_8B = dict(vocab_size=128_256, hidden_size=4096, intermediate_size=14_336, num_hidden_layers=32,
                   num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=131_072,
                   rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                   rope_parameters={"rope_type": "llama3", "rope_theta": 500_000.0, "factor": 8.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192},
                   hidden_act="silu", initializer_range=0.02)
_TINY = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=2048)

SHAPES: dict[str, Shape] = {
    "w2": Shape("qwen2", _QWEN25_15B, CHATML),
    "w3": Shape("llama", _LLAMA31_8B, LLAMA3),
    "tiny-w2": Shape("qwen2", {**_QWEN25_15B, **_TINY, "vocab_size": 512, "max_window_layers": 2}, CHATML),
    "tiny-w3": Shape("llama", {**_LLAMA31_8B, **_TINY, "vocab_size": 640, "head_dim": 16,
                               "rope_parameters": {**_LLAMA31_8B["rope_parameters"],
                                                   "original_max_position_embeddings": 256}}, LLAMA3),
}
PARAMETERS = {"w2": 1_543_714_304, "w3": 8_030_261_248}  # the real models' parameter counts


def shape(name: str) -> Shape:
    """The shape called `name`, or a one-line error listing the known ones."""
    if name not in SHAPES:
        raise ValueError(f"unknown model shape {name!r}; known: {', '.join(SHAPES)}")
    return SHAPES[name]


# ---------------------------------------------------------------- the tokenizer


def _printable_symbols() -> list[str]:
    """Byte-level symbols of printable ASCII (letters first, then digits, space, punctuation, newline)."""
    from tokenizers import pre_tokenizers

    level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    chars = string.ascii_lowercase + string.ascii_uppercase + string.digits + " " + string.punctuation + "\n"
    return [level.pre_tokenize_str(c)[0][0] for c in chars]


def bpe_vocabulary(size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A byte-level BPE vocabulary of exactly `size` entries and its merges: the 256 byte symbols, then
    printable pairs, then pairs extended by one printable symbol, in a fixed order."""
    from tokenizers import pre_tokenizers

    if size < 256:
        raise ValueError(f"a byte-level vocabulary needs at least 256 entries; got {size}")
    vocab = {symbol: i for i, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    merges: list[tuple[str, str]] = []
    common = _printable_symbols()
    pairs = [(a, b) for a in common for b in common]
    triples = ((a + b, c) for a, b in pairs for c in common)
    for left, right in itertools.chain(pairs, triples):
        if len(vocab) == size:
            break
        if left + right not in vocab:
            vocab[left + right] = len(vocab)
            merges.append((left, right))
    if len(vocab) < size:
        raise ValueError(f"vocabulary size {size} is larger than this construction reaches ({len(vocab)})")
    return vocab, merges


def build_tokenizer(name: str):
    """The fast tokenizer of shape `name`: exactly `vocab_size` entries (BPE, then the chat format's special
    tokens as the last ids), the chat template, eos and pad set, left padding."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    spec = shape(name)
    chat = spec.chat
    vocab, merges = bpe_vocabulary(spec.vocab_size - len(chat.specials))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(chat.specials))
    named = {chat.eos, chat.pad, chat.bos}
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=chat.eos, pad_token=chat.pad, bos_token=chat.bos,
        additional_special_tokens=[s for s in chat.specials if s not in named])
    fast.chat_template = chat.template
    fast.padding_side = "left"
    if len(fast) != spec.vocab_size:
        raise AssertionError(f"{name}: built {len(fast)} tokens, expected {spec.vocab_size}")
    return fast


# ---------------------------------------------------------------- the model


def model_config(name: str, tokenizer=None):
    """The transformers config of shape `name`, its token ids those of `tokenizer` (default: the shape's)."""
    from transformers import AutoConfig

    spec = shape(name)
    tokenizer = tokenizer if tokenizer is not None else build_tokenizer(name)
    config = AutoConfig.for_model(spec.model_type, **spec.fields, bos_token_id=tokenizer.bos_token_id,
                                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    config.architectures = [{"qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}[spec.model_type]]
    return config


def meta_model(name: str, tokenizer=None):
    """Shape `name` as a model on the meta device: its modules and parameter shapes, no memory."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(model_config(name, tokenizer), dtype=torch.bfloat16)


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def write_model_folder(name: str, out_dir: Path, seed: int = 0, device: str | None = None) -> None:
    """Write shape `name` with random weights (seeded, initialised in bf16 on `device`) and its tokenizer into
    `out_dir` with `save_pretrained`."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    tokenizer = build_tokenizer(name)
    config = model_config(name, tokenizer)
    torch.manual_seed(seed)
    with torch.device(device or default_device()):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config = GenerationConfig(bos_token_id=tokenizer.bos_token_id,
                                               eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, max_shard_size="5GB")
    tokenizer.save_pretrained(out_dir)
    (out_dir / MARKER).write_text(json.dumps({"shape": name, "seed": seed}))


def build_model_folder(name: str, out_dir: str | Path, seed: int = 0, device: str | None = None) -> Path:
    """`out_dir` holding shape `name` (built once: a complete folder of the same shape and seed is reused;
    one of another shape or seed is a one-line error)."""
    from lmgym.policies.loading.models import build_once

    shape(name)
    out = Path(out_dir)
    if (out / "config.json").is_file():
        marker = out / MARKER
        held = json.loads(marker.read_text()) if marker.is_file() else None
        if held != {"shape": name, "seed": seed}:
            raise ValueError(f"{out} already holds another model ({held or 'not built by this script'}); "
                             f"expected shape {name!r}, seed {seed}: give another folder")
        return out
    return build_once(out, lambda tmp: write_model_folder(name, tmp, seed, device))


def folder_shape(folder: str | Path) -> str | None:
    """The shape a folder built here holds (None for any other folder)."""
    marker = Path(folder) / MARKER
    return json.loads(marker.read_text())["shape"] if marker.is_file() else None


# ---------------------------------------------------------------- the workloads


@dataclass(frozen=True)
class Workload:
    """One user-scale workload's settings, the same on both sides."""

    shape: str
    prompts: int          # prompts per step
    group: int            # samples per prompt
    max_new: int          # new tokens at most per completion
    lora_r: int = 0       # 0: full fine-tuning
    beta: float = 0.04
    lr: float = 1e-6
    micro_batch: int = 8  # trajectories per forward/backward (TRL: per_device_train_batch_size)


WORKLOADS: dict[str, Workload] = {
    "w2": Workload("w2", prompts=16, group=8, max_new=1024),
    "w3": Workload("w3", prompts=8, group=8, max_new=512, lora_r=16),
    "tiny-w2": Workload("tiny-w2", prompts=2, group=2, max_new=4, micro_batch=2),
    "tiny-w3": Workload("tiny-w3", prompts=2, group=2, max_new=4, lora_r=4, micro_batch=2),
}


def synthetic_question(index: int) -> str:
    """A fixed word problem (random weights make the answers irrelevant; the lengths are GSM8K-like)."""
    a, b, c = 3 * index + 7, index % 13 + 2, index % 5 + 4
    return (f"Problem {index}: a farmer has {a} apples. She buys {b} boxes with {c} apples in each box, gives "
            f"{b + 1} apples to each of her {c - 1} neighbours and eats one apple a day for a week. The rest are "
            f"shared equally among her {b + c} goats. How many apples does each goat get?")


def load_questions(path: str | None, count: int) -> list[str]:
    """The first `count` questions of a GSM8K JSONL file, in file order, or `count` synthetic ones."""
    if not path:
        return [synthetic_question(i) for i in range(count)]
    questions = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                questions.append(json.loads(line)["question"])
            if len(questions) == count:
                return questions
    raise ValueError(f"{path} holds {len(questions)} questions; this run needs {count}")


def text_reward(text: str) -> float:
    """A cheap reward that varies between samples: distinct characters in the completion, divided by 100."""
    return len(set(text)) / 100.0


# ---------------------------------------------------------------- measurement, the same on both sides

GB = 1e9


def cap_memory(gb: float | None) -> None:
    """Let this process allocate at most `gb` GiB on the GPU (`torch.cuda.set_per_process_memory_fraction`), so
    "fits on an 80 GB card" can be checked on a larger one; None or no GPU: no cap. Beyond it torch raises its
    out-of-memory error, as on a card of that size."""
    if gb is None or not torch.cuda.is_available():
        return
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    if gb * 2**30 > total:
        raise SystemExit(f"--memory-cap-gb {gb}: this GPU has only {total / 2**30:.1f} GiB")
    torch.cuda.set_per_process_memory_fraction(gb * 2**30 / total)


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


class PhaseMeter:
    """Seconds and peak allocated GPU memory of named phases run one after another (`switch` starts the next,
    after a device synchronisation; the peak counter is reset at each switch, so each phase gets its own);
    `end_step` closes a step and returns its {phase: seconds} and {phase: peak GB} (no peaks on the CPU)."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.started = 0.0
        self.seconds: dict[str, float] = {}
        self.peaks: dict[str, float] = {}
        self.overall_peak = 0.0  # GB, over everything metered (the resets hide it from max_memory_allocated)
        self.steps: list[dict] = []

    def switch(self, phase: str | None) -> None:
        synchronize()
        now = time.perf_counter()
        if self.phase is not None:
            self.seconds[self.phase] = self.seconds.get(self.phase, 0.0) + now - self.started
            if torch.cuda.is_available():
                peak = torch.cuda.max_memory_allocated() / GB
                self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), peak)
                self.overall_peak = max(self.overall_peak, peak)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        self.phase, self.started = phase, now

    def end_step(self) -> dict:
        self.switch(None)
        step = {"seconds": self.seconds, "peak_gb": self.peaks}
        self.steps.append(step)
        self.seconds, self.peaks = {}, {}
        return step


def tensor_bytes(tensors) -> dict[str, int]:
    """Bytes by dtype of distinct tensors (a storage shared by two, as tied weights, counted once); of an FSDP
    shard (a DTensor), the local shard this rank holds."""
    seen, out = set(), {}
    for t in tensors:
        if t is not None and callable(getattr(t, "to_local", None)):
            t = t.to_local()
        if t is None or t.device.type == "meta":
            continue
        key = (t.untyped_storage().data_ptr(), t.dtype, t.numel())
        if key in seen:
            continue
        seen.add(key)
        dtype = str(t.dtype).removeprefix("torch.")
        out[dtype] = out.get(dtype, 0) + t.numel() * t.element_size()
    return out


def module_tensors(module) -> list:
    return [*module.parameters(), *module.buffers()] if module is not None else []


def optimizer_tensors(optimizer) -> list:
    """Every tensor of an optimizer's state (an accelerate wrapper unwrapped)."""
    optimizer = getattr(optimizer, "optimizer", optimizer)
    return [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)]


def memory_breakdown(parts: dict[str, list], peak_gb: float | None) -> dict:
    """GB of each resident part (e.g. weights, gradients: the trainable parameters' size, optimizer state,
    reference), in all and by dtype, and what the update phase's peak `peak_gb` holds beyond them: activations
    and the rest (temporaries, the sampler's buffers if not listed, allocator slack)."""
    by_dtype = {name: tensor_bytes(tensors) for name, tensors in parts.items()}
    out: dict = {f"{name}_gb": sum(b.values()) / GB for name, b in by_dtype.items()}
    out["by_dtype_gb"] = {name: {k: v / GB for k, v in b.items()} for name, b in by_dtype.items() if b}
    out["update_peak_gb"] = peak_gb
    if peak_gb is not None:
        out["activations_and_rest_gb"] = peak_gb - sum(sum(b.values()) for b in by_dtype.values()) / GB
    return out


def steady_summary(step_s: list[float], tokens: list[float], meter: PhaseMeter, warmup: int) -> dict:
    """Median seconds a step and completion tokens/s over the steps after `warmup`, each phase's median
    seconds and largest peak over them."""
    steady = slice(warmup, None)
    phases = meter.steps[steady]
    names = sorted({name for s in phases for name in s["seconds"]})
    return {
        "step_s": step_s, "median_step_s": statistics.median(step_s[steady]),
        "completion_tokens": tokens,
        "completion_tok_per_s": sum(tokens[steady]) / sum(step_s[steady]),
        "phases_median_s": {n: statistics.median(s["seconds"].get(n, 0.0) for s in phases) for n in names},
        "phase_peak_gb": ({n: max(s["peak_gb"].get(n, 0.0) for s in phases) for n in names}
                          if torch.cuda.is_available() else None),
        "peak_mem_gb": meter.overall_peak if torch.cuda.is_available() else None,
    }


def main() -> None:
    # toolkit-free script (no lmgym.training.cli.example_parser): no prefix matching of flags at least
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("out", help="folder to write (reused when it holds this shape and seed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="where the weights are initialised (default: cuda if "
                                                       "available, else cpu)")
    args = parser.parse_args()
    folder = build_model_folder(args.shape, args.out, args.seed, args.device)
    print(json.dumps({"shape": args.shape, "folder": str(folder),
                      "parameters": sum(p.numel() for p in meta_model(args.shape).parameters())}))


if __name__ == "__main__":
    main()
