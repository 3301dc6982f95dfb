# MCTS with the critic as its value, once the chain's critic and evaluate are done (c3's output says so), beside the
# chain until the lease's end: MINUTES = the lease's minutes left less 3. Its finished budgets are kept as they end
# (96, then 192, then 384: the partial file under /root/i36/vl/curves/, brought back by the pack), so a cut run
# still gives the small budgets, and a later lease that carries the file in continues it. Run as a file:
#   MINUTES=16 WAIT=560 bash statics/results/session31_h200/next_lease/c4b.sh
R=$PWD; cd /root/tree
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 \
  PYTHONPATH=/root/tree:/tmp/site OMP_NUM_THREADS=2 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
setsid nohup python benchmarks/issue36_gpu.py /root/i36 --stage curves_mcts_critic --levels 2 \
  --timeout $((${MINUTES:-16} * 60)) > /root/logs/i36b.log 2>&1 < /dev/null &
sleep 5; cat /root/logs/i36b.log; cd "$R"
WAIT=${WAIT:-560} bash statics/results/session29_h200/next_lease/c4.sh; grep "curves L2:" /root/i36/logs/curves_mcts_critic.0.log
cp /root/logs/*.log $OUT/ 2>/dev/null; true
