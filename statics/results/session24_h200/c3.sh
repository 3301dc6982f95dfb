# W4a diagnostics on this tree: where a decode step's rows go (bucket rows x steps: sampling, playing, fed), steps
# by bucket shape, a profiled 64-problem chunk (the measured chunks' size); then the admission rule and sync_every 4
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
mkdir -p /root/logs
A="--workloads w4a --w4a_problems 128 --measure_s 30 --decoder_set shape_steps={}"
timeout 200 python benchmarks/w4_multistep.py $A --w4a_profile_problems 64 --decoder_set "bucket_trace=[]" \
  --label lru --out /root/logs/w4a_lru.json > /root/logs/w4a_lru.log 2>&1; echo lru rc $?
timeout 150 python benchmarks/w4_multistep.py $A --no-profile --decoder_set admit_by_use=true \
  --label admit --out /root/logs/w4a_admit.json > /root/logs/w4a_admit.log 2>&1; echo admit rc $?
timeout 150 python benchmarks/w4_multistep.py $A --no-profile --decoder_set sync_every=4 \
  --label sync4 --out /root/logs/w4a_sync4.json > /root/logs/w4a_sync4.log 2>&1; echo sync4 rc $?
grep -h "chunk\|done in" /root/logs/w4a_*.log
python benchmarks/bucket_replay.py /root/logs/w4a_lru.w4a.buckets.json > /root/logs/replay.txt 2>&1; tail -20 /root/logs/replay.txt
cd /root/logs && tar czf $OUT/w4a_diag.tgz w4a_* replay.txt; ls -la $OUT
