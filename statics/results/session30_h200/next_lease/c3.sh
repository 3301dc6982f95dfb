# the embedded model, a copy of the tree, the second lease's labels (level 2, both policies) into the run folder;
# then chain A in the background: the budgeted SFT, the critic, the verifiers and their evaluation, the five
# MCTSSearch-against-GRPO seeds (MCTSSearch now scales its step advantages by their root mean square) and the
# seed-000 pipeline with the full-scale verifier; then wait
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf && rm /root/m/a
rm -rf /root/tree && mkdir /root/tree && cp -r benchmarks examples lmgym pyproject.toml /root/tree/
mkdir -p /root/i36/vl/labels && cp statics/results/session28_h200/i36/vl/labels/* /root/i36/vl/labels/ \
  && gunzip -f /root/i36/vl/labels/*.gz && ls -la /root/i36/vl/labels
ONLY=sft,critic,train,evaluate,mcts_seed0,mcts_seed1,mcts_seed2,mcts_seed3,mcts_seed4
ONLY=$ONLY,pipe_sft,pipe_ppo,pipe_grpo,pipe_grpo_prm,pipe_mcts
ONLY=$ONLY PARALLEL=7 MINUTES=24 LOG=i36.log WAIT=480 bash statics/results/session30_h200/next_lease/chain.sh
