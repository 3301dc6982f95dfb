# the embedded model, a copy of the tree, the twenty-seventh session's L2 labels carried in (their stages done),
# and issue 36's next stages in the background; then wait on them and bring back what is made
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf && rm /root/m/a
R=$PWD; L=$R/statics/results/session27_h200/i36/vl/labels
mkdir -p /root/i36/vl/labels && for f in $L/*.jsonl.gz; do gunzip -c $f > /root/i36/vl/labels/$(basename $f .gz); done
cp $L/stats.json /root/i36/vl/labels/ && ls -la /root/i36/vl/labels
rm -rf /root/tree && mkdir /root/tree && cp -r benchmarks examples lmgym pyproject.toml /root/tree/
cd /root/tree
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 \
  PYTHONPATH=/root/tree:/tmp/site
setsid nohup python benchmarks/issue36_gpu.py /root/i36 --next --levels 2 --parallel 2 --minutes 26 \
  --only sft,critic,train,evaluate,curves_maj,curves_mcts,dense_seed0,mcts_seed0 \
  --timeout 1500 > /root/logs/i36.log 2>&1 < /dev/null &
echo started; sleep 500; cat /root/logs/i36.log; tail -n 3 /root/i36/logs/*.log 2>/dev/null | cut -c1-200
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv
bash $R/statics/results/session27_h200/next_lease/pack.sh
