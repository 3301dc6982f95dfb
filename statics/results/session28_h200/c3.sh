# the embedded model, a copy of the tree, and issue 36's level-2 chain from new labels (Arithmetic's splits are
# shuffled since the twenty-seventh session: the carried labels were all sums) in the background; then wait
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf && rm /root/m/a
R=$PWD; rm -rf /root/tree && mkdir /root/tree && cp -r benchmarks examples lmgym pyproject.toml /root/tree/
cd /root/tree
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 \
  PYTHONPATH=/root/tree:/tmp/site
setsid nohup python benchmarks/issue36_gpu.py /root/i36 --next --levels 2 --parallel 2 --minutes 25 \
  --only sft,label_L2,second_L2,critic,label_stats,train,evaluate,curves_maj,curves_mcts \
  --timeout 1500 > /root/logs/i36.log 2>&1 < /dev/null &
echo started; sleep 500; cat /root/logs/i36.log; tail -n 3 /root/i36/logs/*.log 2>/dev/null | cut -c1-200
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv
bash $R/statics/results/session27_h200/next_lease/pack.sh
