#!/usr/bin/env bash
# W4a (policy step labels) under the kept-bucket rules, each in its own process, back to back on one GPU (about 8
# minutes of an H200), then the traced run's requests replayed under other rules offline:
#
#   bash benchmarks/w4a_bucket_rules.sh OUT [BEFORE_TREE]
#
# 1. BEFORE_TREE (optional): another checkout of the toolkit on PYTHONPATH, e.g. the code before the admission rule
#    and the spaced full collections (d089754) -> OUT/w4a_before.json
# 2. this tree with least recently used eviction alone (the default, admit_by_use false) -> OUT/w4a_lru.json
# 3. this tree with the admission rule (--decoder_set admit_by_use=true), its bucket requests traced ->
#    OUT/w4a_admit.json, OUT/w4a_admit.w4a.buckets.json
# then `w4_multistep.py --compare` of each against the next and `bucket_replay.py` of the trace (OUT/*.txt).
# PROBLEMS (default 192), MEASURE_S (40) and LIMIT_S (170) size each run; SITE is added to PYTHONPATH (wheels);
# PYTHON (default python) runs them; EXTRA holds more w4_multistep.py arguments for every run. On the CPU,
#   PYTHON=.venv/bin/python EXTRA="--tiny --max_new_tokens 4 --w4a_max_steps 2 --w4a_warmup_problems 0" PROBLEMS=1
# checks the script in a minute.
set -euo pipefail
export PYTHONUNBUFFERED=1 WANDB_MODE=${WANDB_MODE:-disabled}
out=${1:?usage: bash benchmarks/w4a_bucket_rules.sh OUT [BEFORE_TREE]}
before=${2:-}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
run() {  # label tree extra-args...
  local label=$1 tree=$2
  shift 2
  PYTHONPATH="$tree${SITE:+:$SITE}" timeout $(( ${LIMIT_S:-170} + 40 )) "${PYTHON:-python}" "$here/benchmarks/w4_multistep.py" \
    --workloads w4a --w4a_problems "${PROBLEMS:-192}" --measure_s "${MEASURE_S:-40}" --no-profile --label "$label" \
    --time_limit_s "${LIMIT_S:-170}" --out "$out/w4a_$label.json" ${EXTRA:-} "$@" > "$out/w4a_$label.log" 2>&1 \
    && echo "$label: done" || echo "$label: exit $?"
  grep -h "measured chunk" "$out/w4a_$label.log" || true
}
compare() {
  PYTHONPATH="$here${SITE:+:$SITE}" "${PYTHON:-python}" "$here/benchmarks/w4_multistep.py" --compare "$out/w4a_$1.json" \
    "$out/w4a_$2.json" > "$out/compare_$1_$2.txt" 2>&1 && cat "$out/compare_$1_$2.txt"
}
[[ -n "$before" ]] && run before "$before"
run lru "$here" --decoder_set admit_by_use=false
run admit "$here" --decoder_set admit_by_use=true --decoder_set "bucket_trace=[]"
[[ -n "$before" ]] && compare before lru
compare lru admit
PYTHONPATH="$here${SITE:+:$SITE}" "${PYTHON:-python}" "$here/benchmarks/bucket_replay.py" "$out/w4a_admit.w4a.buckets.json" \
  > "$out/replay.txt" 2>&1 && cat "$out/replay.txt"
