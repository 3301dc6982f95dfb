"""`benchmarks/issue36_gpu.py --rehearse MODEL`'s settings: every stage (level 2, one seed) at the scripts' cpu
presets and smallest sizes, on a given model, so the commands' files and order are checked in minutes on a CPU
before a lease."""
from __future__ import annotations

import json
from pathlib import Path

REHEARSAL_LOOP = ("--label_problems", "2", "--samples", "2", "--rollouts", "1", "--max_new_tokens", "4",
                  "--max_steps", "2", "--eval_problems", "2", "--curve_problems", "2", "--budgets", "16,32",
                  "--train_iterations", "2", "--pairs_per_iteration", "4", "--micro_batch_size", "4",
                  "--simulations", "2", "--batch_problems", "2", "--sft_examples", "4", "--sft_iterations", "1")
REHEARSAL_CRITIC = ("--level", "2", "--turns", "2", "--eval_episodes", "2", "--max_new_tokens", "4",
                    "--sft_examples", "4", "--reflect_problems", "3", "--pair_problems", "2", "--pair_feedbacks", "2",
                    "--pair_refinements", "1", "--sft_iterations", "1", "--reflect_sft_iterations", "1",
                    "--dpo_iterations", "1", "--batch_prompts", "4", "--no-progress")
REHEARSAL_TOKENS = 200  # sampled tokens a training run
REHEARSAL_DENSE = ("--eval-episodes", "2", "--max-new-tokens", "4", "--max-steps", "2")
REHEARSAL_SEARCH = ("--eval-episodes", "2", "--max-steps", "2", "--max-iterations", "1")
# the pipeline's stages at their smallest (YAML files written beside the run by rehearsal_files)
REHEARSAL_PIPELINE = {"sft": "examples_per_iteration: 2\nmicro_batch_size: 2\nmax_length: 1024\n",
                      "prm": "pairs_per_iteration: 2\nmicro_batch_size: 4\n",
                      "grpo": "prompts_per_iteration: 2\nsamples_per_prompt: 2\nmicro_batch_size: 4\n",
                      "ppo": "prompts_per_iteration: 4\nmicro_batch_size: 4\nminibatch_size: 4\nupdate_epochs: 1\n"}
# a tiny model's episodes are never right, so its DPO gets its pairs from two recorded refinements (--triples)
REHEARSAL_TRIPLES = ({"question": "What is 2 + 3? Give the final answer after ####.", "initial": "#### 6",
                      "feedback": "Check the sum.", "refined": "2 + 3 = 5\n#### 5", "gold": 5},
                     {"question": "What is 2 + 3? Give the final answer after ####.", "initial": "#### 6",
                      "feedback": "Looks right.", "refined": "#### 6", "gold": "5"})


def rehearsal_pipeline(out: Path) -> tuple[str, ...]:
    """The pipeline's flags at its smallest, its stage configs read from `out` (rehearsal_files writes them)."""
    flags = ["--level", "1", "--max_steps", "2", "--episodes", "2", "--max_new_tokens", "4", "--simulations", "2",
             "--sft_examples", "4", "--prm_problems", "4"]
    for stage in REHEARSAL_PIPELINE:
        flags += [f"--{stage}_config", str(out / f"rehearsal_{stage}.yaml"), f"--{stage}_iterations", "1"]
    return tuple(flags)


def rehearsal_files(out: Path) -> None:
    """The files the rehearsal's commands read: the critic's recorded refinements and the pipeline's configs."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "rehearsal_triples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in REHEARSAL_TRIPLES))
    for stage, text in REHEARSAL_PIPELINE.items():
        (out / f"rehearsal_{stage}.yaml").write_text(text)
