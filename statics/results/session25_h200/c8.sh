# W4a as a real labelling run does it: one policy_labels call over four preset-sized batches (64 problems each) a
# chunk, so buckets are kept between batches. "before" (07913d6 as a copy) against this tree, and this tree with
# overlap_batches; each its own process
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1
mkdir -p /root/logs/c
C="--workloads w4a --w4a_problems 256 --w4a_batch 256 --w4a_set batch_size=64 --measure_s 30 --no-profile"
PYTHONPATH=/root/base:/tmp/site timeout 200 python benchmarks/w4_multistep.py $C --label before --out /root/logs/c/before.json > /root/logs/c/before.log 2>&1; echo before rc $?
export PYTHONPATH=$PWD:/tmp/site
timeout 100 python benchmarks/w4_multistep.py $C --label after --out /root/logs/c/after.json > /root/logs/c/after.log 2>&1; echo after rc $?
timeout 100 python benchmarks/w4_multistep.py $C --w4a_set overlap_batches=true --label overlap --out /root/logs/c/overlap.json > /root/logs/c/overlap.log 2>&1; echo overlap rc $?
grep -h "measured chunk\|done in\|rror" /root/logs/c/*.log
for n in after overlap; do python benchmarks/w4_multistep.py --compare /root/logs/c/before.json /root/logs/c/$n.json | grep -i w4a; done
cd /root/logs/c && tar czf $OUT/w4a_real.tgz *; ls -la $OUT
