# start one chain of issue36_gpu.py stages in the background from the tree copy in /root/tree (ONLY: the stages,
# PARALLEL at once, none whose estimate passes MINUTES, EXTRA: more flags, e.g. --mcts-advantages whiten; its log
# /root/logs/LOG), then wait on every chain (up to WAIT seconds) and bring back what they made (the second lease's
# c4.sh). Run as a file (bash chain.sh), never inline: the wait's pgrep -f would find a command line that names the
# script it waits for.
R=$PWD; cd /root/tree
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 \
  PYTHONPATH=/root/tree:/tmp/site OMP_NUM_THREADS=2 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
python benchmarks/issue36_gpu.py /root/i36 --list --levels 2 $EXTRA | grep -v "^done" | head -40
setsid nohup python benchmarks/issue36_gpu.py /root/i36 --next --levels 2 --parallel "$PARALLEL" --minutes "$MINUTES" \
  --only "$ONLY" --timeout $((MINUTES * 60)) $EXTRA > "/root/logs/$LOG" 2>&1 < /dev/null &
sleep 5; cat "/root/logs/$LOG"; cd "$R"
WAIT=${WAIT:-540} bash statics/results/session29_h200/next_lease/c4.sh; cp /root/logs/*.log $OUT/ 2>/dev/null; true
