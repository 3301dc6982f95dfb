#!/usr/bin/env bash
# Issue 25's GPU figures on one card (benchmarks/RESULTS.md, "A verifier trained on the policy's own samples"):
# examples/verifier_loop.py's stages as parallel processes, at most five on the card at once (on a loaded card
# fourteen processes ran the curves out of memory). About 15 minutes on one H200.
#
#   bash benchmarks/verifier_loop_gpu.sh OUT            # OUT: the run folder and the logs
#
# LP (train problems a level, default 256), CP (curve problems, 128) and BUDGETS (96,192,384,768) size it.
set -euo pipefail
export PYTHONUNBUFFERED=1
out=$1
mkdir -p "$out"
loop() {
  python examples/verifier_loop.py --preset gpu --output_dir "$out/vl" --no-progress --budgets "${BUDGETS:-96,192,384,768}" \
    --label_problems "${LP:-256}" --curve_problems "${CP:-128}" "$@"
}
# one labelling process a train level; each also labels one held-out level (outcome labels only): two of them
# label level 4's, and the file is replaced whole (lmgym.core.atomic_io), so the last one written is kept
loop --stages label --train_levels 2 --test_levels 2 > "$out/label2.log" 2>&1 &
loop --stages label --train_levels 3 --test_levels 4 > "$out/label3.log" 2>&1 &
loop --stages label --train_levels 4 --test_levels 4 > "$out/label4.log" 2>&1 &
wait
loop --stages label > "$out/labelstats.log" 2>&1   # every level is saved: this writes labels/stats.json only
loop --stages train --verifiers orm > "$out/train_orm.log" 2>&1 &
loop --stages train --verifiers prm_soft > "$out/train_prm.log" 2>&1 &
wait
loop --stages evaluate > "$out/eval.log" 2>&1
loop --stages curves --test_levels 2 > "$out/curves2.log" 2>&1 &
loop --stages curves --test_levels 4 > "$out/curves4.log" 2>&1 &
wait
loop --stages curves > "$out/final.log" 2>&1   # both levels saved: the summary, vl/verifier_loop.md
