# W4a as a labelling run does it (one call over batches of 64 a chunk), overlap_batches now on by default, with a
# profiled chunk of 128 problems (two batches): GPU busy share and where the rest goes
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
mkdir -p /root/logs/d
timeout 190 python benchmarks/w4_multistep.py --workloads w4a --w4a_problems 128 --w4a_batch 128 --w4a_set batch_size=64 \
  --measure_s 30 --w4a_profile_problems 128 --decoder_set shape_steps={} --label after_profiled \
  --out /root/logs/d/after_profiled.json > /root/logs/d/after_profiled.log 2>&1; echo rc $?
grep -v "^\[" /root/logs/d/after_profiled.log | tail -30; grep -h "chunk\|done in" /root/logs/d/after_profiled.log
cd /root/logs/d && tar czf $OUT/w4a_profiled.tgz *; ls -la $OUT
