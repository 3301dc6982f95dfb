#!/usr/bin/env bash
# W1 alone, an earlier tree against this one, alternating (A B A B ...), each run in its own process on one GPU, then
# each run's median step split into sampling, scoring (prepare) and update: whether W1's gap between two trees is
# the code or the run's noise, and which phase holds it (the twenty-fourth session's lease read 0.93x, all of it in
# the update and scoring phases):
#
#   bash benchmarks/w1_ab.sh OUT BEFORE_TREE GSM8K_TRAIN
#
# ROUNDS (default 2) pairs; STEPS (default 6) measured W1 steps a run; SITE is added to PYTHONPATH (wheels); PYTHON
# (default python) runs them; EXTRA holds more w4_multistep.py arguments. On the CPU,
#   PYTHON=.venv/bin/python EXTRA=--tiny ROUNDS=1 bash benchmarks/w1_ab.sh /tmp/ab . ../shared/data/gsm8k/train.jsonl
# checks the script in a minute.
set -euo pipefail
export PYTHONUNBUFFERED=1 WANDB_MODE=${WANDB_MODE:-disabled}
out=${1:?usage: bash benchmarks/w1_ab.sh OUT BEFORE_TREE GSM8K_TRAIN}
before=${2:?usage: bash benchmarks/w1_ab.sh OUT BEFORE_TREE GSM8K_TRAIN}
gsm8k=${3:?usage: bash benchmarks/w1_ab.sh OUT BEFORE_TREE GSM8K_TRAIN}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
run() {  # label tree
  PYTHONPATH="$2${SITE:+:$SITE}" "${PYTHON:-python}" "$here/benchmarks/w4_multistep.py" --workloads w1 \
    --w1_steps "${STEPS:-6}" --label "$1" --no-profile --out "$out/w1_$1.json" --gsm8k "$gsm8k" ${EXTRA:-} \
    > "$out/w1_$1.log" 2>&1 && echo "$1: done" || echo "$1: exit $?"
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  run "before$round" "$before"
  run "after$round" "$here"
done
"${PYTHON:-python}" - "$out" <<'PY' | tee "$out/w1_ab.md"
import json, sys
from pathlib import Path

print("| run | completion tok/s | median step s | sample s | prepare s | update s |")
print("|---|---:|---:|---:|---:|---:|")
runs = Path(sys.argv[1]).glob("w1_*.json")
for path in sorted(runs, key=lambda p: (int("".join(filter(str.isdigit, p.stem)) or 0), "after" in p.stem)):
    w1 = json.loads(path.read_text())["workloads"].get("w1", {})
    if "completion_tok_per_s" not in w1:
        print(f"| {path.stem} | {w1.get('error', 'no result')} | | | | |")
        continue
    p = w1["phases_median_s"]
    print(f"| {path.stem} | {w1['completion_tok_per_s']:,.0f} | {w1['median_step_s']:.3f} | {p['time_sample']:.3f} | "
          f"{p['time_prepare']:.3f} | {p['time_update']:.3f} |")
PY
