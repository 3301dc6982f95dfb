# gpu_smoke on this tree (owed from the twenty-fourth session: quickstart ran out of memory beside others), with
# each example's peak GPU memory; then quickstart alone if it failed
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
cp .device/model-b/gsm8k_train.jsonl /root/m/
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
mkdir -p /root/logs/smoke
JOBS=3 BUDGET=430 timeout 460 bash benchmarks/gpu_smoke.sh /root/dcopy /root/logs/smoke > /root/logs/smoke.out 2>&1
echo smoke rc $?; tail -16 /root/logs/smoke.out
if grep -q "quickstart.*FAIL" /root/logs/smoke.out; then
  mkdir -p /root/logs/smoke_q
  ONLY=quickstart JOBS=1 BUDGET=100 timeout 120 bash benchmarks/gpu_smoke.sh /root/dcopy /root/logs/smoke_q > /root/logs/smoke_q.out 2>&1
  echo quickstart alone rc $?; tail -6 /root/logs/smoke_q.out
fi
cp /root/logs/smoke*.out $OUT/; (cd /root/logs/smoke && tar czf $OUT/smoke_logs.tgz *.log); ls -la $OUT
