# W4a on this tree (bb67d3c: no index-assignment syncs, joins in batches, bucketed one-pass feeds), profiled chunk
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
mkdir -p /root/logs
timeout 220 python benchmarks/w4_multistep.py --workloads w4a --w4a_problems 128 --measure_s 30 --w4a_profile_problems 64 \
  --decoder_set shape_steps={} --label joined2 --out /root/logs/w4a_joined2.json > /root/logs/w4a_joined2.log 2>&1; echo rc $?
grep -h "chunk\|done in\|FAILED" /root/logs/w4a_joined2.log
cd /root/logs && tar czf $OUT/w4a_joined2.tgz w4a_joined2*; ls -la $OUT
