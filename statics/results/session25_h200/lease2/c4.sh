# gpu_smoke on this tree after the PRM trainer's token-bounded micro-batches (train_prm peaked at 122 GB in lease 1
# and quickstart, beside it, ran out of memory); every example at once as before (JOBS=3)
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
mkdir -p /root/logs/smoke
JOBS=3 BUDGET=430 timeout 460 bash benchmarks/gpu_smoke.sh /root/dcopy /root/logs/smoke > /root/logs/smoke.out 2>&1
echo smoke rc $?; cat /root/logs/smoke.out | grep -v "^start"
cp /root/logs/smoke.out $OUT/; (cd /root/logs/smoke && tar czf $OUT/smoke_logs.tgz *.log); ls -la $OUT
