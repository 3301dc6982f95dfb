# W4a: e49c79a (this session's start) against this tree without prompts joining (the pinned asynchronous copies
# alone) and with them (the default), each in its own process, back to back; the last with its profiled chunk
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
rm -rf /root/head && cp -r .device/head /root/head
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1
mkdir -p /root/logs
A="--workloads w4a --w4a_problems 128 --measure_s 30"
PYTHONPATH=/root/head:/tmp/site timeout 150 python benchmarks/w4_multistep.py $A --no-profile --label start \
  --out /root/logs/w4a_start.json > /root/logs/w4a_start.log 2>&1; echo start rc $?
export PYTHONPATH=$PWD:/tmp/site
timeout 150 python benchmarks/w4_multistep.py $A --no-profile --decoder_set join_waiting=false \
  --decoder_set shape_steps={} --label copies --out /root/logs/w4a_copies.json > /root/logs/w4a_copies.log 2>&1; echo copies rc $?
timeout 220 python benchmarks/w4_multistep.py $A --w4a_profile_problems 64 --decoder_set shape_steps={} \
  --label joined --out /root/logs/w4a_joined.json > /root/logs/w4a_joined.log 2>&1; echo joined rc $?
grep -h "chunk\|done in\|FAILED" /root/logs/w4a_*.log
python benchmarks/w4_multistep.py --compare /root/logs/w4a_start.json /root/logs/w4a_copies.json
python benchmarks/w4_multistep.py --compare /root/logs/w4a_start.json /root/logs/w4a_joined.json
cd /root/logs && tar czf $OUT/w4a_join.tgz w4a_*; ls -la $OUT
