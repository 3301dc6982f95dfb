# only when the training chain has ended (or is ending) with MINUTES or more of the lease left: the headline table on
# one pool of samples (the critic, the verifiers' evaluation, maj's curve with the pooled table) and the scaling
# curve's 2,000 point, in the background beside anything still running; then wait as c4 does. Run as a file:
#   MINUTES=14 WAIT=560 bash statics/results/session29_h200/next_lease/c5.sh
MINUTES=${MINUTES:-14}
R=$PWD; cd /root/tree
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 \
  PYTHONPATH=/root/tree:/tmp/site OMP_NUM_THREADS=2 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
setsid nohup python benchmarks/issue36_gpu.py /root/i36 --next --levels 2 --parallel 3 --minutes $MINUTES \
  --only critic,evaluate,curves_maj,scaling_n2000 --timeout $((MINUTES * 60)) > /root/logs/i36b.log 2>&1 < /dev/null &
sleep 5; cat /root/logs/i36b.log; cd $R
WAIT=${WAIT:-540} bash statics/results/session29_h200/next_lease/c4.sh; cat /root/logs/i36b.log
