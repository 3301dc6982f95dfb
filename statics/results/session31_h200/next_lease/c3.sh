# the embedded model, a copy of the tree, the second lease's labels (level 2, both policies) and the 31st session's
# five GRPO runs (so the seeds train MCTSSearch alone) into the run folder; then the chain in the background: the
# budgeted SFT, the critic, the verifiers and their evaluation, every rule's curve from one pool (the critic's among
# them) of the policy's samples and of the budgeted SFT's, and MCTSSearch's five seeds with whitened step
# advantages; then wait
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf && rm /root/m/a
rm -rf /root/tree && mkdir /root/tree && cp -r benchmarks examples lmgym pyproject.toml /root/tree/
mkdir -p /root/i36/vl/labels && cp statics/results/session28_h200/i36/vl/labels/* /root/i36/vl/labels/ \
  && gunzip -f /root/i36/vl/labels/*.gz && ls -la /root/i36/vl/labels
mkdir -p /root/i36/search_training && cp -r statics/results/session31_h200/i36/search_training/GRPO-seed? \
  /root/i36/search_training/ && ls /root/i36/search_training
ONLY=sft,critic,train,evaluate,curves_pool,curves_pool_sft,mcts_seed0,mcts_seed1,mcts_seed2,mcts_seed3,mcts_seed4
EXTRA="--mcts-advantages whiten" ONLY=$ONLY PARALLEL=8 MINUTES=24 LOG=i36.log WAIT=480 \
  bash statics/results/session31_h200/next_lease/chain.sh
