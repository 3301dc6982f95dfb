# the embedded model, a copy of the tree, the second lease's labels (level 2, a uniform sample, both policies) into
# the run folder, and issue 36's training comparisons from them in the background, five stages at a time: all five
# seeds of both, from the budgeted SFT at the rate after SFT (2e-6) and 896 held-out problems a run; then wait
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf && rm /root/m/a
R=$PWD; rm -rf /root/tree && mkdir /root/tree && cp -r benchmarks examples lmgym pyproject.toml /root/tree/
mkdir -p /root/i36/vl/labels && cp statics/results/session28_h200/i36/vl/labels/* /root/i36/vl/labels/ \
  && gunzip -f /root/i36/vl/labels/*.gz && ls -la /root/i36/vl/labels
cd /root/tree
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 \
  PYTHONPATH=/root/tree:/tmp/site OMP_NUM_THREADS=2 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
ONLY=sft,train,dense_seed0,mcts_seed0,dense_seed1,mcts_seed1,dense_seed2,mcts_seed2,dense_seed3,mcts_seed3
ONLY=$ONLY,dense_seed4,mcts_seed4
python benchmarks/issue36_gpu.py /root/i36 --list --levels 2 > /root/logs/list.txt; head -3 /root/logs/list.txt
setsid nohup python benchmarks/issue36_gpu.py /root/i36 --next --levels 2 --parallel 5 --minutes 26 \
  --only $ONLY --timeout 1500 > /root/logs/i36.log 2>&1 < /dev/null &
echo started; sleep 480; cat /root/logs/i36.log; tail -n 3 /root/i36/logs/*.log 2>/dev/null | cut -c1-200
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv
bash $R/statics/results/session28_h200/next_lease/pack.sh
