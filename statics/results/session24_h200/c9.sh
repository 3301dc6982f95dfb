# gpu_smoke on this tree: every example's one-command GPU run, cut short
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
mkdir -p /root/logs/smoke
JOBS=3 BUDGET=400 timeout 430 bash benchmarks/gpu_smoke.sh /root/dcopy /root/logs/smoke > /root/logs/smoke.out 2>&1
echo smoke rc $?; tail -15 /root/logs/smoke.out
cp /root/logs/smoke.out $OUT/; (cd /root/logs/smoke && tar czf $OUT/smoke_logs.tgz *.log); ls -la $OUT
