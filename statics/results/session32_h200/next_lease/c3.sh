# the embedded model, a copy of the tree and the second lease's labels (level 2, both policies) into the run folder;
# then the chain in the background: the budgeted SFT, the critic, the three verifiers (the ORM, the PRM and the ORM
# with a within-problem ranking term, orm_ranked), their held-out evaluation (with the AUC within problems), and
# every rule's curve under every scorer from one pool of the budgeted SFT's samples and one of the policy's; then wait
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf && rm /root/m/a
rm -rf /root/tree && mkdir /root/tree && cp -r benchmarks examples lmgym pyproject.toml /root/tree/
mkdir -p /root/i36/vl/labels && cp statics/results/session28_h200/i36/vl/labels/* /root/i36/vl/labels/ \
  && gunzip -f /root/i36/vl/labels/*.gz && ls -la /root/i36/vl/labels
ONLY=sft,critic,train,evaluate,curves_pool_sft,curves_pool
ONLY=$ONLY PARALLEL=4 MINUTES=25 LOG=i36.log WAIT=540 bash statics/results/session31_h200/next_lease/chain.sh
