"""Issue 36's whole measurement set on one GPU, in stages that each fit one device call (< 9 minutes), resumable.

    python benchmarks/issue36_gpu.py OUT --list                 # stages, minutes estimated, done or not
    python benchmarks/issue36_gpu.py OUT --next --minutes 9     # the next unfinished stages whose estimates fit 9 min
    python benchmarks/issue36_gpu.py OUT --next --minutes 25 --parallel 2 --timeout 1500   # two at a time
    python benchmarks/issue36_gpu.py OUT --next --minutes 25 --parallel 2 --only sft,critic,train   # these only
    python benchmarks/issue36_gpu.py OUT --stage label_L2       # one stage
    python benchmarks/issue36_gpu.py OUT --dry_run              # parse every stage's command (CPU, no model)
    python benchmarks/issue36_gpu.py OUT --report               # every saved summary -> OUT/issue36.md
    python benchmarks/issue36_gpu.py OUT --next --rehearse MODEL --parallel 2 --minutes 500   # all of it, on a CPU

A stage is done when its output file exists, and is then skipped. Its commands run in parallel processes (one
GPU), each logged to OUT/logs/<stage>.<k>.log, under a --timeout (default 540 s) that keeps a cut stage inside a
device call: rerun it (labels start over, trainers continue from their checkpoints, finished parts are kept).
A stage names the stages whose outputs it reads (`after`); with --parallel K, --next runs up to K stages at once,
each when those are done, and plans by the estimates which fit --minutes (a device machine is fresh each session,
so a session's chain from labels to curves has to fit one session's device time).
The stages, in order of priority (the headline search figures first), with the minutes each is estimated at on
one H200: measured two at a time in the twenty-seventh session's lease where it ran them (sft, the labels, the
critic, train, evaluate, the maj, MCTS and beam curves, scaling), scaled from the issue-25 run otherwise. Labels
carried in from an earlier lease (OUT/vl/labels/*.jsonl and stats.json) mark their stages done:

1. sft: the budgeted first-answer SFT (the second policy: 128 gold solutions a level, 24 x 32 examples).
2. label_L<l> / second_L<l>: the policy's labels of 2,000 train problems of level l (with the held-out test labels)
   / the second policy's (after sft).
3. critic: examples/reflection_dpo.py --preset gpu_room (the checked critic, SFT then DPO; 4-5 min measured alone).
   Then label_stats (seconds): labels/stats.json over all the labels.
4. train: the ORM and the soft-label PRM on the balanced labels, two processes.
5. evaluate: held-out AUC, ECE, maj@8 / weighted / best-of-8 by level.
6. curves_*: L2, 896 held-out problems: maj@8 / weighted / best-of-8 with the verifier and with the critic (the
   headline table) with the capped maj curve; the other capped curves, a stage a method or two, beside it
   (curves_mcts_critic: MCTS with the critic as its value; curves_pool: every rule under every scorer, the critic's
   among them, at every budget, from one pool of 48 samples a problem; curves_pool_sft: the same from the budgeted
   SFT's samples).
7. scaling_n<size>: the verifier's held-out AUC with the first 250 / 500 / 1,000 / 2,000 labelled problems.
8. dense_seed<k> / mcts_seed<k>: dense-credit GRPO against outcome-only GRPO and MCTSSearch against GRPO from the
   budgeted SFT (a mixed-group start), on the last labelled level (the PRM's), equal sampled tokens, seeds 0-4,
   at RL_AFTER_SFT_LR, each run's held-out accuracy on 896 test problems (measured in the twenty-ninth session's
   lease, six to eight processes on one H200 and 256 test problems: dense 7.7-10.2 min, mcts 4.0-6.4; in the
   thirtieth's, ten processes and 896 problems, the dense refresh in two passes a step: dense 6.2-6.9, mcts 5.8-6.6).
   MCTSSearch's step advantages unscaled (search_training.py --mcts-advantages none, the default): its gradient is
   a tenth of GRPO's and it held its start; scaled by their root mean square it lost 3.6 points (31st session).
9. pipe_*: the seed-000 pipeline, gpu_room preset (level 4, budgeted SFT) with the full-scale PRM.

The estimates add up to more than three hours of one H200 (--dry_run prints the sum): a 30-minute session
gets through level 2's labels, the verifiers, their evaluation and the headline table (--levels 2 --parallel 2,
run in the background while device calls wait on it). A later session's machine is fresh: its OUT starts from
the files carried back (labels and tables; not models), so a stage that reads a model reruns the stages that
make it. The summaries stage (last) merges only what is
complete: a script whose parts are not all saved is left out (it would train the missing ones).
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling issue36_rehearsal, also when loaded by path
from issue36_rehearsal import (  # noqa: E402
    REHEARSAL_CRITIC,
    REHEARSAL_DENSE,
    REHEARSAL_LOOP,
    REHEARSAL_SEARCH,
    REHEARSAL_TOKENS,
    rehearsal_files,
    rehearsal_pipeline,
)

SCRIPTS = {"verifier_loop": ROOT / "examples" / "verifier_loop.py",
           "reflection": ROOT / "examples" / "reflection_dpo.py", "pipeline": ROOT / "examples" / "pipeline.py",
           "dense": ROOT / "benchmarks" / "dense_vs_outcome.py",
           "search_training": ROOT / "benchmarks" / "search_training.py",
           "scaling": ROOT / "benchmarks" / "verifier_scaling.py"}
# The training comparisons start from the budgeted SFT. At the scripts' default 5e-5 (tuned from the base model) all
# four methods lost accuracy in 19 of 20 runs on an H200 (greedy 30.9% before, 25.4 / 21.6 / 28.0 / 23.4% after,
# twenty-ninth session), as examples/pipeline.py's GRPO did after its SFT at 5e-5 (90.2% -> 57.4%); 2e-6 is the
# pipeline's rate after SFT and the usual range for RL after SFT.
RL_AFTER_SFT_LR = 2e-6
TRAINING_EVAL_PROBLEMS = 896  # each run's held-out greedy accuracy (256 problems: 2.9 points of error a run)


@dataclass(frozen=True)
class Stage:
    """One device call's work: commands (script key, argv) run in parallel; done once `output` exists."""

    name: str
    minutes: float
    output: Path
    commands: tuple[tuple[str, tuple[str, ...]], ...]
    needs: tuple[tuple[Path, ...], ...] = ()  # per command, files that must exist for it to run (summaries)
    after: tuple[str, ...] = ()  # stages whose outputs this one reads: it starts once they are done


# the curves' token caps a problem: up to about twice maj@8's tokens (341 on L2 in the twenty-third session), and
# MCTS's up to maj@8's (its target; each cap costs more than the last). The weighted maj, best-of-N and critic
# curves' minutes scale that session's seconds on 128 problems to 896 (weighted maj 64 s, best-of-N 47 s); the
# maj (with the headline table), MCTS and beam curves took 8.1, 7.7 and 2.7 min in the twenty-seventh session.
# maj's curve goes on to 1,024 tokens: the critic's rows generate about 790 a problem with its checks (the second
# lease), and their equal-tokens comparison takes maj at the smallest budget reaching that. The headline table on
# one pool of samples (sampled once, not five times) pays for the extra budget.
CURVE_BUDGETS, MCTS_BUDGETS, MAJ_BUDGETS = "96,192,384,768", "96,192,384", "96,192,384,768,1024"


def stages(out: Path, levels: list[int], seeds: int = 5, sizes: tuple[int, ...] = (250, 500, 1000, 2000),
           token_budget: int = 300_000, rehearse: str | None = None, mcts_advantages: str = "none") -> list[Stage]:
    """Every stage of the set, in order (see the module docstring); `rehearse`: a model folder, and the
    scripts' cpu presets at their smallest (issue36_rehearsal.py); `mcts_advantages`: MCTSSearch's step advantage
    scaling (search_training.py --mcts-advantages)."""
    vl, critic = out / "vl", out / "reflection" / "dpo" / "model"
    train = ",".join(map(str, levels))
    tiny = ("--model", rehearse, *REHEARSAL_LOOP) if rehearse else ()
    loop = ("--preset", "cpu" if rehearse else "gpu", "--output_dir", str(vl), "--no-progress", "--second_policy",
            "sft", "--train_levels", train, *tiny)
    tests = ("--test_levels", train)  # held-out labels and the verifier's AUC on every level
    curves = (*loop, "--stages", "curves", "--test_levels", "2", "--critic", str(critic),
              *(() if rehearse else ("--budgets", CURVE_BUDGETS)))
    mcts_curve = (*curves, *(() if rehearse else ("--budgets", MCTS_BUDGETS)))
    maj_curve = (*curves, *(() if rehearse else ("--budgets", MAJ_BUDGETS)))
    sft_model = str(vl / "sft" / "model")
    # the two SFTs: the second policy (small) and the critic (4-5 min measured)
    out_list = [Stage("sft", 2, vl / "sft" / "model" / "config.json",
                      (("verifier_loop", (*loop, *tests, "--stages", "sft")),))]
    labels, scored = [], ("evaluate", "critic")  # the curves' scorers: the better verifier and the critic
    for level in levels:  # 2,000 problems at 8 x k = 4 and the held-out test labels (2.4 min projected by W4a)
        out_list.append(Stage(f"label_L{level}", 5.5, vl / "labels" / f"train_L{level}.jsonl", (
            ("verifier_loop", (*loop, "--stages", "label", "--train_levels", str(level), "--test_levels", str(level),
                               "--label_only", "policy")),)))
        out_list.append(Stage(f"second_L{level}", 2, vl / "labels" / f"train_L{level}.second.jsonl", (
            ("verifier_loop", (*loop, "--stages", "label", "--train_levels", str(level), "--test_levels", str(level),
                               "--label_only", "second")),), after=("sft",)))
        labels += [f"label_L{level}", f"second_L{level}"]
    out_list += [
        Stage("critic", 3, critic / "config.json",
              (("reflection", ("--preset", "cpu", "--model", rehearse, *REHEARSAL_CRITIC, "--output_dir",
                               str(out / "reflection"), "--triples", str(out / "rehearsal_triples.jsonl"))
                if rehearse else
                ("--preset", "gpu_room", "--output_dir", str(out / "reflection"))),)),
        Stage("label_stats", 0.5, vl / "labels" / "stats.json",
              (("verifier_loop", (*loop, *tests, "--stages", "label")),), after=tuple(labels)),
        Stage("train", 4, vl / "verifiers" / "prm_soft" / "model", (
            ("verifier_loop", (*loop, *tests, "--stages", "train", "--verifiers", "orm")),
            ("verifier_loop", (*loop, *tests, "--stages", "train", "--verifiers", "prm_soft")),
            # the ORM with a ranking term over one problem's right-wrong pairs (the 32nd session's pools: the
            # verifiers' AUC within problems was 0.65-0.69 on the budgeted SFT's samples, 0.92 over them all)
            ("verifier_loop", (*loop, *tests, "--stages", "train", "--verifiers", "orm_ranked"))),
              after=("label_stats",)),
        Stage("evaluate", 1, vl / "verifier_eval.json",
              (("verifier_loop", (*loop, *tests, "--stages", "evaluate")),), after=("train",)),
        # curves_maj writes the uncapped table (maj@8 / weighted / best-of-8, the headline); every curve part
        # scores with the verifier and the critic, and runs beside the others
        Stage("curves_maj", 8.5, vl / "curves" / "L2_part_maj.json",
              (("verifier_loop", (*maj_curve, "--curve_methods", "maj")),), after=scored),
        # every rule under every scorer (verifiers, critic, both) at every budget from one pool of 48 samples a
        # problem: sampled once (about 1,250 tokens a problem), the critic checks each sample once (estimated from
        # the headline table's seconds: its 8 samples 40 s, the critic's checks 35 s; 16.6 min measured in the 32nd
        # session's lease, beside curves_pool_sft and five MCTSSearch seeds on the card)
        Stage("curves_pool", 17, vl / "curves" / "L2_pool.json", (("verifier_loop", (
            *maj_curve, "--curve_methods", "pool", *(() if rehearse else ("--pool_samples", "48")))),),
              after=scored),
        # the same from the budgeted SFT's samples (right on a quarter of them, a right one among 8 on 36% of the
        # train problems: the base policy's pool held one on 14% of the held-out problems, which bounded the
        # verifiers' gain); its samples are shorter (about 18 tokens), so 64 of them pass maj's largest budget;
        # 15.1 min measured beside curves_pool (the critic's checks are most of it: 2,763 tokens a problem)
        Stage("curves_pool_sft", 15, vl / "curves" / "L2_pool_second.json", (("verifier_loop", (
            *maj_curve, "--curve_methods", "pool", "--pool_policy", "second",
            *(() if rehearse else ("--pool_samples", "64")))),), after=(*scored, "sft")),
        # 7.9 min measured when its trees spent 82% of the 384 cap; capped trees now spend all of it (curves.capped):
        # 16.6 min in the 31st session's lease, three curves beside ten training processes on the card
        Stage("curves_mcts", 16, vl / "curves" / "L2_part_mcts.json",
              (("verifier_loop", (*mcts_curve, "--curve_methods", "mcts")),), after=scored),
        # MCTS with the critic as its value (each new node judged by the critic's check and verdict): cut unfinished
        # at 18 min in the 31st session's lease, as curves_critic was (curves_pool gives the critic's curves now);
        # about 15 min in the 32nd, its three budgets kept as each finished
        Stage("curves_mcts_critic", 16, vl / "curves" / "L2_part_mcts_critic.json",
              (("verifier_loop", (*mcts_curve, "--curve_methods", "mcts_critic")),), after=scored),
        Stage("curves_critic", 20, vl / "curves" / "L2_part_weighted_maj_critic+best_of_n_critic.json", (
            ("verifier_loop", (*curves, "--curve_methods", "weighted_maj_critic,best_of_n_critic")),),
              after=scored),
        Stage("curves_weighted", 8, vl / "curves" / "L2_part_weighted_maj.json",
              (("verifier_loop", (*curves, "--curve_methods", "weighted_maj")),), after=scored),
        Stage("curves_best_of_n", 6, vl / "curves" / "L2_part_best_of_n.json",
              (("verifier_loop", (*curves, "--curve_methods", "best_of_n")),), after=scored),
        Stage("curves_beam", 3, vl / "curves" / "L2_part_beam.json", (("verifier_loop", (*curves, "--curve_methods",
                                                                                           "beam")),),
              after=scored),
    ]
    scaling_args = ("--model", rehearse, "--train_iterations", "2") if rehearse else ()
    for size in sizes:
        out_list.append(Stage(f"scaling_n{size}", 3.2, out / "scaling" / f"n{size}" / "result.json", (
            ("scaling", ("--run", str(vl), "--sizes", str(size), "--out", str(out / "scaling"), *scaling_args)),),
            after=("label_stats",)))
    prm = str(vl / "verifiers" / "prm_soft" / "model")
    # the training comparisons run on the last labelled level: the PRM was trained on its labels, and the budgeted
    # SFT is right on a quarter of its samples there (mixed groups; level 3 it never saw)
    level, tokens = str(levels[-1]), str(REHEARSAL_TOKENS if rehearse else token_budget)
    # both start from the SFT, so at its rate, not the scripts' default (tuned from the base model), and each run is
    # measured on 896 problems (on 256 a run's own error, 2.9 points, was most of the spread over seeds)
    after_sft = ("--learning-rate", str(RL_AFTER_SFT_LR), "--eval-episodes", str(TRAINING_EVAL_PROBLEMS))
    dense_args = ("--preset", "cpu" if rehearse else "gpu", "--model", sft_model, "--level", level, "--verifier", prm,
                  "--token-budget", tokens, *after_sft, *(REHEARSAL_DENSE if rehearse else ()))
    search_args = ("--model", sft_model, "--level", level, "--token-budget", tokens, *after_sft,
                   "--mcts-advantages", mcts_advantages, *(REHEARSAL_SEARCH if rehearse else ()))
    for seed in range(seeds):
        common = ("--seeds", "1", "--first-seed", str(seed))
        out_list.append(Stage(f"dense_seed{seed}", 7.5, out / "dense" / f"dense-seed{seed}" / "result.json", (
            ("dense", (*dense_args, "--methods", "outcome", "--out", str(out / "dense"), *common)),
            ("dense", (*dense_args, "--methods", "dense", "--out", str(out / "dense"), *common))),
            after=("sft", "train")))
        done = out / "search_training" / f"MCTSSearch-seed{seed}" / "result.json"
        out_list.append(Stage(f"mcts_seed{seed}", 7, done, (  # 6.8-7.0 min in the 32nd session's lease
            ("search_training", ("--runs", "GRPO", *search_args, "--out", str(out / "search_training"), *common)),
            ("search_training", ("--runs", "MCTSSearch", "--mcts-evaluation", "prm", "--prm", prm, *search_args,
                                 "--out", str(out / "search_training"), *common))), after=("sft", "train")))
    pipe = ("--preset", "cpu", "--model", rehearse, *rehearsal_pipeline(out)) if rehearse else ("--preset", "gpu_room")
    pipe = (*pipe, "--output_dir", str(out / "pipeline"), "--prm", prm, "--no-progress")
    # one folder, each stage after the model it starts from: PPO and GRPO from the SFT (so they can run side by
    # side), GRPO + PRM from GRPO's model, MCTS searching with GRPO + PRM's
    # minutes beside the MCTSSearch seeds on an H200 (31st session): sft 1.5, ppo 3.4, grpo 2.7, grpo_prm 3.7, mcts 2.4
    for name, minutes, done, chosen, after in (("pipe_sft", 2, "sft/eval.json", "base,sft", "train"),
                                               ("pipe_ppo", 3.5, "ppo/eval.json", "ppo", "pipe_sft"),
                                               ("pipe_grpo", 3, "grpo/eval.json", "grpo", "pipe_sft"),
                                               ("pipe_grpo_prm", 4, "grpo_prm/eval.json", "grpo_prm", "pipe_grpo"),
                                               ("pipe_mcts", 2.5, "mcts/eval.json", "mcts", "pipe_grpo_prm")):
        out_list.append(Stage(name, minutes, out / "pipeline" / done, (("pipeline", (*pipe, "--stages", chosen)),),
                              after=(after,)))
    # the summaries: every saved part merged (seconds; rerun after any stage)
    dense_done = tuple(out / "dense" / f"{m}-seed{k}" / "result.json" for m in ("outcome", "dense")
                       for k in range(seeds))
    mcts_done = tuple(out / "search_training" / f"{m}-seed{k}" / "result.json" for m in ("GRPO", "MCTSSearch")
                      for k in range(seeds))
    out_list += [
        Stage("summaries", 1, out / "summaries.done", needs=(
            (vl / "labels" / "stats.json",), dense_done, mcts_done,
            tuple(out / "scaling" / f"n{n}" / "result.json" for n in sizes),
            (out / "pipeline" / "mcts" / "eval.json",)),
              commands=(
            ("verifier_loop", (*loop, *tests, "--stages", "label")),
            ("dense", (*dense_args, "--seeds", str(seeds), "--out", str(out / "dense"))),
            ("search_training", ("--runs", "GRPO", "MCTSSearch", "--mcts-evaluation", "prm", "--prm", prm,
                                 *search_args, "--seeds", str(seeds), "--out", str(out / "search_training"))),
            ("scaling", ("--run", str(vl), "--sizes", ",".join(map(str, sizes)), "--out", str(out / "scaling"),
                         *scaling_args)),
            ("pipeline", (*pipe, "--stages", "base"))),
              after=tuple(s.name for s in out_list)),  # --stage summaries merges what is saved at any time
    ]
    return out_list


def parser_of(key: str) -> argparse.ArgumentParser:
    """The argument parser of a stage's script, loaded without running it (examples/ on sys.path for `common`)."""
    path = SCRIPTS[key]
    for folder in (str(path.parent), str(ROOT)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"issue36_{key}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_parser()


def dry_run(all_stages: list[Stage]) -> int:
    """Parse every command of every stage with its script's own parser; prints each and returns the count."""
    parsers: dict[str, argparse.ArgumentParser] = {}
    count = 0
    for stage in all_stages:
        for key, argv in stage.commands:
            parser = parsers.setdefault(key, parser_of(key))
            try:
                parser.parse_args(list(argv))
            except SystemExit as stop:
                raise SystemExit(f"dry run: stage {stage.name}: {SCRIPTS[key].name} rejects {' '.join(argv)}") from stop
            count += 1
        print(f"ok  {stage.name:<18} {stage.minutes:>4} min  {len(stage.commands)} command(s)")
    print(f"dry run: {count} commands of {len(all_stages)} stages parse; "
          f"{sum(s.minutes for s in all_stages):.0f} minutes estimated in all")
    return count


def run_stage(stage: Stage, out: Path, timeout: float) -> bool:
    """Run the stage's commands in parallel (each logged); True when its output exists afterwards."""
    if stage.output.exists() and stage.name != "summaries":
        print(f"[{stage.name}] done ({stage.output}), skipped")
        return True
    (out / "logs").mkdir(parents=True, exist_ok=True)
    start, processes = time.perf_counter(), []
    for k, (key, argv) in enumerate(stage.commands):
        missing = [p for p in (stage.needs[k] if k < len(stage.needs) else ()) if not p.exists()]
        if missing:
            print(f"[{stage.name}] {SCRIPTS[key].name} left out: {len(missing)} of its parts are not saved yet")
            continue
        log = open(out / "logs" / f"{stage.name}.{k}.log", "w")
        processes.append((subprocess.Popen([sys.executable, str(SCRIPTS[key]), *argv], stdout=log,
                                           stderr=subprocess.STDOUT, cwd=ROOT), log))
    for process, log in processes:
        try:
            process.wait(timeout=max(1.0, timeout - (time.perf_counter() - start)))
        except subprocess.TimeoutExpired:
            process.terminate()
            process.wait()
        log.close()
    if stage.name == "summaries":
        stage.output.write_text("merged\n")
    done = stage.output.exists()
    print(f"[{stage.name}] {'done' if done else 'NOT done'} in {(time.perf_counter() - start) / 60:.1f} min "
          f"(estimated {stage.minutes}); codes {[p.returncode for p, _ in processes]}; logs in {out / 'logs'}")
    return done


def plan(all_stages: list[Stage], slots: int, minutes: float, only: set[str] | None = None
         ) -> tuple[list[Stage], list[Stage]]:
    """The unfinished stages that fit `minutes` by their estimates when `slots` of them run at once, each after the
    stages it needs (list scheduling in the stages' order, each on the slot where it starts first), and those
    that do not fit (or need one that does not). With `only`, the stages not named there are never planned
    (neither list holds them), so a stage that needs one of them unfinished does not fit."""
    done = {s.name for s in all_stages if s.output.exists()}
    free, end = [0.0] * slots, {}
    chosen, left = [], []
    for stage in all_stages:
        if stage.name in done or (only is not None and stage.name not in only):
            continue
        if any(d not in done and d not in end for d in stage.after):
            left.append(stage)
            continue
        ready = max((end.get(d, 0.0) for d in stage.after), default=0.0)
        slot = min(range(slots), key=lambda k: (max(ready, free[k]), -free[k]))
        start = max(ready, free[slot])
        if start + stage.minutes > minutes:
            left.append(stage)
            continue
        free[slot] = end[stage.name] = start + stage.minutes
        chosen.append(stage)
    return chosen, left


def run_next(all_stages: list[Stage], out: Path, minutes: float, slots: int, timeout: float,
             only: set[str] | None = None) -> None:
    """Run `plan`'s stages (of `only`, when given), up to `slots` at once, each once the stages it needs are done;
    a stage that fails takes the stages that need it with it, and none starts whose estimate would pass `minutes`
    of wall time."""
    chosen, left = plan(all_stages, slots, minutes, only)
    for stage in left:
        print(f"next: {stage.name} ({stage.minutes} min estimated) does not fit the {minutes:g} min "
              f"with {slots} at once")
    by_name = {s.name: s for s in all_stages}
    start, failed, running = time.perf_counter(), set(), {}
    with ThreadPoolExecutor(max_workers=slots) as pool:
        while chosen or running:
            for stage in list(chosen):
                if len(running) >= slots:
                    break
                if failed.intersection(stage.after):
                    chosen.remove(stage)
                    failed.add(stage.name)
                    print(f"skipped: {stage.name} needs {', '.join(sorted(failed.intersection(stage.after)))}")
                elif all(by_name[d].output.exists() for d in stage.after):
                    chosen.remove(stage)
                    if (time.perf_counter() - start) / 60 + stage.minutes > minutes:
                        print(f"next: {stage.name} ({stage.minutes} min estimated) does not fit the time left")
                        continue
                    running[pool.submit(run_stage, stage, out, timeout)] = stage
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                stage = running.pop(future)
                if not future.result():
                    failed.add(stage.name)
                    print(f"stopped: {stage.name} did not finish (see its log); rerun --next to continue it")


# the report's sections: (title, the summary a script writes under OUT, the stages that make it)
REPORT = (("Labels, verifiers and search at inference (level 2, held-out test problems)", "vl/verifier_loop.md",
           "label_L2 .. curves_*"),
          ("The critic (reflection, gpu_room preset)", "reflection/reflection.md", "critic"),
          ("The verifier's AUC against labelled problems", "scaling/scaling.md", "scaling_n*"),
          ("Dense credit against outcome-only GRPO", "dense/results.md", "dense_seed*, summaries"),
          ("MCTSSearch against GRPO", "search_training/summary.md", "mcts_seed*, summaries"),
          ("The seed-000 pipeline with the verifier", "pipeline/pipeline.md", "pipe_*"))


def demoted(markdown: str) -> str:
    """`markdown` with its headings two levels down, to sit under a section of the report."""
    return "\n".join("##" + line if line.startswith("#") else line for line in markdown.splitlines())


def report(out: Path) -> str:
    """One markdown of every summary saved under `out` (a section each, in REPORT's order); a summary not saved
    yet is named with the stages that make it."""
    parts = [f"# Issue 36's measurements ({out})\n"]
    for title, path, makers in REPORT:
        saved = out / path
        body = (demoted(saved.read_text().strip()) if saved.is_file() else f"(not run yet: {makers})")
        parts.append(f"## {title}\n\n`{path}`\n\n{body}\n")
    return "\n".join(parts)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the run folder (every stage's output and logs)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true", help="the stages, their estimates, done or not")
    what.add_argument("--next", action="store_true", help="run unfinished stages in order while they fit --minutes")
    what.add_argument("--stage", help="run one stage by name")
    what.add_argument("--dry_run", action="store_true", help="parse every command; load no model")
    what.add_argument("--report", action="store_true",
                      help="every saved summary in one markdown -> OUT/issue36.md (also printed)")
    parser.add_argument("--minutes", type=float, default=9.0, help="--next: the estimated minutes to fill (default 9)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="--next: stages run at once on the one GPU (default 1; the embedded model's stages "
                             "peak at 55 GB or less, so 2 fit an H200)")
    parser.add_argument("--only", default=None,
                        help="--next: plan only these stages, comma-separated (their order stays the stages' own)")
    parser.add_argument("--timeout", type=float, default=540.0, help="seconds a stage may run (default 540)")
    parser.add_argument("--levels", default="2,3,4", help="train levels labelled (default 2,3,4)")
    parser.add_argument("--seeds", type=int, default=5, help="training seeds (default 5)")
    parser.add_argument("--mcts-advantages", choices=("none", "rms", "whiten"), default="none",
                        help="MCTSSearch's step advantage scaling in the mcts_seed stages (default none; the saved "
                             "runs must match: search_training.py refuses others)")
    parser.add_argument("--rehearse", metavar="MODEL", default=None,
                        help="every stage, level 2 and one seed, at the scripts' cpu presets and smallest sizes, "
                             "on MODEL (a folder): the files and the order, in minutes (with --next)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    if not levels or 2 not in levels:
        raise SystemExit(f"--levels must hold level 2 (the search figures' level), got {args.levels!r}")
    if args.rehearse:
        if not Path(args.rehearse).is_dir():
            raise SystemExit(f"--rehearse {args.rehearse}: no such model folder")
        all_stages = stages(out, [2], 1, sizes=(2,), rehearse=args.rehearse, mcts_advantages=args.mcts_advantages)
        rehearsal_files(out)
    else:
        all_stages = stages(out, levels, args.seeds, mcts_advantages=args.mcts_advantages)
    if args.dry_run:
        dry_run(all_stages)
        return
    if args.report:
        if not out.is_dir():
            raise SystemExit(f"--report: {out} is no folder (the run's OUT)")
        text = report(out)
        (out / "issue36.md").write_text(text)
        print(text, end="")
        return
    if args.list:
        for s in all_stages:
            print(f"{'done' if s.output.exists() else '    '}  {s.name:<18} {s.minutes:>4} min  -> {s.output}")
        return
    if args.stage:
        chosen = [s for s in all_stages if s.name == args.stage]
        if not chosen:
            raise SystemExit(f"--stage {args.stage!r}: no such stage; --list names them")
        run_stage(chosen[0], out, args.timeout)
        return
    if args.parallel < 1:
        raise SystemExit(f"--parallel must be >= 1, got {args.parallel}")
    only = None
    if args.only is not None:
        only = {x.strip() for x in args.only.split(",") if x.strip()}
        unknown = sorted(only - {s.name for s in all_stages})
        if unknown or not only:
            raise SystemExit(f"--only: no such stage {', '.join(unknown) or '(none named)'}; --list names them")
    run_next(all_stages, out, args.minutes, args.parallel, args.timeout, only)


if __name__ == "__main__":
    main()
