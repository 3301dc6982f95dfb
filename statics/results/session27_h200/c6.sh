# the lease's last minutes: the verifier's scaling sizes 500, 1000 (side by side), then 2000; then the results
R=$PWD; cd /root/tree
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 \
  PYTHONPATH=/root/tree:/tmp/site
S="python benchmarks/issue36_gpu.py /root/i36 --levels 2 --timeout 400 --stage"
timeout 420 bash -c "($S scaling_n500; $S scaling_n2000) >> /root/logs/i36.log 2>&1 & $S scaling_n1000 >> /root/logs/i36.log 2>&1; wait"
tail -n 4 /root/i36/logs/scaling_*.log | cut -c1-200
bash $R/statics/results/session27_h200/pack.sh
