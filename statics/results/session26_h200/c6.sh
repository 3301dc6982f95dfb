# gpu_smoke on this tree, every example at once (JOBS=3), with peak memory
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
mkdir -p /root/logs/smoke
JOBS=3 BUDGET=430 timeout 460 bash benchmarks/gpu_smoke.sh /root/dcopy /root/logs/smoke > /root/logs/smoke.out 2>&1
echo smoke rc $?; cat /root/logs/smoke.out | grep -v "^start"
cp /root/logs/smoke.out $OUT/; (cd /root/logs/smoke && tar czf $OUT/smoke_logs.tgz *.log); ls -la $OUT
