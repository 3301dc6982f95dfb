#!/usr/bin/env bash
# The GPU figures of the PRM + search work, one stage per argument (each fits one 10-minute device call):
#
#   bash benchmarks/prm_search.sh prm      OUT GSM8K_TRAIN   # train the PRM (gold corruptions, Math-Shepherd)
#   bash benchmarks/prm_search.sh search   OUT GSM8K_TRAIN   # the search table: Arithmetic-v0 levels 2 and 4
#   bash benchmarks/prm_search.sh gsm8k    OUT GSM8K_TRAIN   # the search table: 200 GSM8K train rows held back
#   bash benchmarks/prm_search.sh training OUT GSM8K_TRAIN   # GRPO vs GRPO+PRM vs MCTSSearch, one token budget
#
# WORK (default /root/work) keeps the PRM between stages; OUT gets logs, tables and metrics.
set -euo pipefail
export PYTHONUNBUFFERED=1
stage=$1 out=$2 gsm8k=$3
work=${WORK:-/root/work}
mkdir -p "$out" "$work"
prm="$work/prm-run/prm"
case "$stage" in
  prm)
    python examples/train_prm.py --preset gpu --gsm8k_path "$gsm8k" --gsm8k_rows 2000 --gsm8k_holdout 500 \
      --shepherd_level 2 --shepherd_problems 16 --shepherd_solutions 2 --shepherd_rollouts 4 \
      --train_iterations 300 --output_dir "$work/prm-run" --no-progress 2>&1 | grep --line-buffered -v Warning | tee "$out/train_prm.log"
    cp "$work/prm-run/metrics.jsonl" "$out/prm_metrics.jsonl"
    ;;
  search)
    for level in 2 4; do
      python examples/search_eval.py --prm "$prm" --level "$level" --episodes 256 --n 8 --beam_width 2 \
        --beam_expand 4 --simulations 24 --output "$out/search_level$level" 2>&1 | grep --line-buffered -v -E "Warning|it/s|s/it|problem/s" \
        | tee "$out/search_level$level.log"
    done
    ;;
  gsm8k)
    # the last 500 train rows are never used for the PRM (--gsm8k_holdout 500); evaluate on 200 of them
    python examples/search_eval.py --prm "$prm" --env GSM8K-v0 --data_path "$gsm8k" --split train \
      --offset 7273 --episodes 200 --n 8 --beam_width 2 --beam_expand 4 --simulations 24 --max_new_tokens 96 \
      --output "$out/search_gsm8k" 2>&1 | grep --line-buffered -v -E "Warning|it/s|s/it|problem/s" | tee "$out/search_gsm8k.log"
    ;;
  training)
    python benchmarks/search_training.py --prm "$prm" --level 2 --token-budget "${BUDGET:-150000}" \
      --prm-weight "${PRM_WEIGHT:-0.25}" \
      --time-limit "${TIME_LIMIT:-220}" --out "$out/training" 2>&1 | grep --line-buffered -v Warning | tee "$out/training.log"
    ;;
  *)
    echo "unknown stage $stage (prm | search | gsm8k | training)" >&2; exit 2 ;;
esac
