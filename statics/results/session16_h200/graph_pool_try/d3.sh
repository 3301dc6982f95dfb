mkdir -p /root/logs
# the shared graph pool: the GPU check on both trees, then W4a before (7f72970) and after (this tree)
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled
here=$PWD
PYTHONPATH=$here:/tmp/site timeout 70 python benchmarks/check_graph_pool.py --calls 8 > /root/logs/pool_after.txt 2>&1; echo rc $? >> /root/logs/pool_after.txt
tail -3 /root/logs/pool_after.txt
cp /root/logs/pool_*.txt $OUT/
(cd /root/base && PYTHONPATH=/root/base:/tmp/site timeout 105 python benchmarks/w4_multistep.py --workloads w4a --w4a_problems 128 \
  --label before --measure_s 40 --time_limit_s 60 --out /root/logs/w4a_before.json > /root/logs/w4a_before.log 2>&1; echo rc $?)
grep -E "w4a" /root/logs/w4a_before.log | tail -8; cp /root/logs/w4a_before.* $OUT/
PYTHONPATH=$here:/tmp/site timeout 105 python benchmarks/w4_multistep.py --workloads w4a --w4a_problems 128 \
  --label after --measure_s 40 --time_limit_s 60 --out /root/logs/w4a_after.json > /root/logs/w4a_after.log 2>&1; echo rc $?
grep -E "w4a" /root/logs/w4a_after.log | tail -8; cp /root/logs/w4a_after.* $OUT/
PYTHONPATH=$here:/tmp/site python benchmarks/w4_multistep.py --compare /root/logs/w4a_before.json /root/logs/w4a_after.json 2>&1 | tee $OUT/w4a_compare.txt
