"""TRL's side of the user-scale workloads W2 and W3: TRL's GRPOTrainer on the same model folder and settings.

    python benchmarks/trl_user_scale_baseline.py --model /tmp/w2_model --prompts 16 --group 8 --max-new 1024 \\
        --mode static [--micro-batch 8] [--gradient-checkpointing] [--liger] [--lora-r 16 [--load-in-4bit]] \\
        [--prompts-file GSM8K_TRAIN] [--steps 5 --warmup 2] [--param-dtype bf16|fp32]

benchmarks/user_scale.py runs it as a subprocess with the toolkit's settings (`--trl-script`). It prints one line
`RESULT {json}`: seconds a step (median after --warmup), completion tokens/s, each phase's median seconds and
peak allocated GPU memory (metered by benchmarks/user_scale_models.PhaseMeter, as on the toolkit's side:
sample = TRL's `_generate`, reference = the rest of `_generate_and_score_completions` (reference and old
log-probs, rewards), update = the forward/backward passes and the optimizer step), the overall peak, and the
memory breakdown (weights, gradients, optimizer state, reference model, the rest of the update's peak), each by
dtype.

Settings, as the toolkit's: the same questions in file order (`shuffle_dataset=False`), system prompt and
reward (benchmarks/user_scale_models.py), `num_generations` = --group, one optimizer step per step over all
prompts x group completions (`per_device_train_batch_size` = --micro-batch completions per forward/backward,
`gradient_accumulation_steps` = the rest; the whole batch is generated at once), temperature 1, beta, learning
rate held constant, gradient clipping at 1.0, bf16 autocast on CUDA over --param-dtype weights (the model is
loaded in that dtype; TRL 1.16 builds its reference model from the same folder in the policy's dtype), no
vLLM (not on the GPU machine). Modes: static (`cache_implementation="static"`), default, paged
(`use_transformers_paged`). TRL's own defaults are kept otherwise (its loss "dapo": tokens weighted over the
whole step, as the toolkit's token_mean; TRL 1.16 computes log-probs through a fused LM head in chunks). TRL
1.x turns gradient checkpointing on by default; here it is off unless --gradient-checkpointing
(non-reentrant, as the toolkit's). --liger sets `use_liger_kernel` (TRL 1.x, deprecated in 1.16 and there
only Liger's layer kernels: RMSNorm, RoPE, SwiGLU; TRL 0.x's `use_liger_loss` where that is the field), which
needs liger-kernel installed. LoRA: peft's LoraConfig
with r, alpha 2r, dropout 0 on every projection, the reference then the base with the adapter off (as the
toolkit's); --load-in-4bit loads the base in NF4 with double quantization and bf16 compute (bitsandbytes).

Needs trl (1.16.0 is the one measured), datasets, and for the options liger-kernel or bitsandbytes; importing
this file needs none of them (tests check its flags without TRL).
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from user_scale_models import (  # noqa: E402
    SYSTEM_PROMPT,
    PhaseMeter,
    cap_memory,
    device_name,
    load_questions,
    memory_breakdown,
    module_tensors,
    optimizer_tensors,
    steady_summary,
    text_reward,
)

MODES = ("static", "default", "paged")
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    # toolkit-free script (no lmgym.training.cli.example_parser): no prefix matching of flags at least
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--model", required=True, help="a model folder (benchmarks/user_scale_models.py)")
    parser.add_argument("--prompts-file", default=None, help="GSM8K train JSONL (default: synthetic questions)")
    parser.add_argument("--prompts", type=int, default=16, help="prompts per step")
    parser.add_argument("--group", type=int, default=8, help="samples per prompt (num_generations)")
    parser.add_argument("--max-new", type=int, default=1024, help="max_completion_length")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--micro-batch", type=int, default=8, help="per_device_train_batch_size (completions)")
    parser.add_argument("--mode", choices=MODES, default="static")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--liger", action="store_true", help="use_liger_kernel (needs liger-kernel)")
    parser.add_argument("--lora-r", type=int, default=0, help="LoRA rank, alpha 2r (0: full fine-tuning)")
    parser.add_argument("--load-in-4bit", action="store_true", help="QLoRA: NF4 base (needs bitsandbytes)")
    parser.add_argument("--param-dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--beta", type=float, default=0.04)
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", default="/tmp/user_scale_trl")
    parser.add_argument("--memory-cap-gb", type=float, default=None, help="GiB this process may allocate on the GPU")
    args = parser.parse_args(argv)
    rows = args.prompts * args.group
    if args.warmup < 0 or args.steps <= args.warmup:
        parser.error("--steps must be greater than --warmup (>= 0)")
    if args.group < 2 or rows % args.micro_batch:
        parser.error(f"--group must be >= 2 and --micro-batch ({args.micro_batch}) divide prompts x group ({rows})")
    if args.load_in_4bit and not args.lora_r:
        parser.error("--load-in-4bit is QLoRA: give --lora-r too")
    return args


def config_kwargs(args: argparse.Namespace, fields: set[str], cuda: bool) -> dict:
    """GRPOConfig keyword arguments for `args`; `fields`: the installed GRPOConfig's field names (the Liger
    switch is named by the TRL version)."""
    rows = args.prompts * args.group
    kwargs = dict(output_dir=args.output_dir, per_device_train_batch_size=args.micro_batch,
                  gradient_accumulation_steps=rows // args.micro_batch, num_generations=args.group,
                  max_completion_length=args.max_new, temperature=1.0, beta=args.beta, learning_rate=args.lr,
                  lr_scheduler_type="constant", max_grad_norm=1.0, max_steps=args.steps, logging_steps=1,
                  report_to="none", save_strategy="no", seed=args.seed, bf16=cuda, use_cpu=not cuda,
                  use_vllm=False, gradient_checkpointing=args.gradient_checkpointing)
    if "shuffle_dataset" in fields:
        kwargs["shuffle_dataset"] = False  # the questions in file order, as the toolkit takes them
    if args.gradient_checkpointing:
        kwargs["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    if args.mode == "static":
        kwargs["cache_implementation"] = "static"
    elif args.mode == "paged":
        kwargs["use_transformers_paged"] = True
    if args.liger:
        kwargs["use_liger_loss" if "use_liger_loss" in fields else "use_liger_kernel"] = True
    return kwargs


def check_extras(args: argparse.Namespace) -> None:
    """One line (SystemExit) for an option whose package is missing."""
    needs = [("trl", True), ("datasets", True), ("liger_kernel", args.liger), ("bitsandbytes", args.load_in_4bit),
             ("peft", bool(args.lora_r))]
    missing = [name for name, needed in needs if needed and importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(f"trl_user_scale_baseline: {', '.join(missing)} not installed (pip install "
                         f"{' '.join(m.replace('_', '-') for m in missing)})")


def reward(completions, **kwargs) -> list[float]:
    """The workloads' reward (`text_reward`) on TRL's completions (message lists or text)."""
    return [text_reward(c[-1]["content"] if isinstance(c, list) else c) for c in completions]


def metered_trainer(trainer_class, meter: PhaseMeter):
    """`trainer_class` switching `meter` to "sample" around generation and to "reference" after it (the rest
    of generate-and-score), then to "update" when the batch is ready."""

    class Metered(trainer_class):
        if hasattr(trainer_class, "_generate"):
            def _generate(self, *a, **kw):
                meter.switch("sample")
                out = super()._generate(*a, **kw)
                meter.switch("reference")
                return out

        def _generate_and_score_completions(self, *a, **kw):
            meter.switch("sample")
            out = super()._generate_and_score_completions(*a, **kw)
            meter.switch("update")
            return out

    return Metered


def load_model(args: argparse.Namespace):
    """The policy from the folder, in --param-dtype (QLoRA: NF4 on GPU 0)."""
    from transformers import AutoModelForCausalLM

    dtype = DTYPES[args.param_dtype]
    if not args.load_in_4bit:
        return AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
    from transformers import BitsAndBytesConfig

    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.bfloat16)
    return AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16, quantization_config=quant,
                                                device_map={"": 0})


def run(args: argparse.Namespace) -> dict:
    check_extras(args)
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    cuda = torch.cuda.is_available()
    meter, step_s = PhaseMeter(), []

    class Timer(TrainerCallback):
        def on_step_begin(self, targs, state, control, **kw):
            meter.switch("other")
            self.t0 = time.perf_counter()

        def on_step_end(self, targs, state, control, **kw):
            meter.end_step()
            step_s.append(time.perf_counter() - self.t0)

    tok = AutoTokenizer.from_pretrained(args.model)
    tok.padding_side = "left"
    questions = load_questions(args.prompts_file, args.prompts * (args.steps + 2))
    data = Dataset.from_list([{"prompt": [{"role": "system", "content": SYSTEM_PROMPT},
                                          {"role": "user", "content": q}]} for q in questions])
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    peft_config = None
    if args.lora_r:
        from peft import LoraConfig

        peft_config = LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.0,
                                 target_modules=LORA_TARGETS, task_type="CAUSAL_LM")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer = metered_trainer(GRPOTrainer, meter)(
        model=load_model(args), processing_class=tok, reward_funcs=[reward],
        args=GRPOConfig(**config_kwargs(args, fields, cuda)), train_dataset=data, callbacks=[Timer()],
        peft_config=peft_config)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history
            if "completions/mean_length" in entry or "completion_length" in entry]
    mean_len = [entry.get("completions/mean_length", entry.get("completion_length")) for entry in logs]
    rows = args.prompts * args.group
    summary = steady_summary(step_s, [m * rows for m in mean_len], meter, args.warmup)
    trainable = [p for p in trainer.model.parameters() if p.requires_grad]
    parts = {"weights": module_tensors(trainer.model), "gradients": trainable,
             "optimizer_state": optimizer_tensors(trainer.optimizer),
             "reference": module_tensors(getattr(trainer, "ref_model", None))}
    return {"anchor": "trl.GRPOTrainer", "mode": args.mode, "trl": __import__("trl").__version__,
            "device": device_name(), **summary,
            "memory": memory_breakdown(parts, (summary["phase_peak_gb"] or {}).get("update")),
            "mean_completion_len": mean_len, "reward": [entry.get("reward") for entry in logs],
            "settings": {k: v for k, v in vars(args).items() if k != "output_dir"},
            "config": {k: v for k, v in config_kwargs(args, fields, cuda).items() if k != "output_dir"}}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cap_memory(args.memory_cap_gb)
    print("RESULT " + json.dumps(run(args)), flush=True)


if __name__ == "__main__":
    main()
