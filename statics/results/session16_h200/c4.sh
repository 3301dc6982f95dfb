# gguf, then gpu_smoke on this tree (compiled prefill on by default on CUDA)
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
cp .device/model-b/gsm8k_train.jsonl .device/model-b/trl_w1_baseline.py /root/m/
export PYTHONPATH=/tmp/site:$PYTHONPATH RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf
sha256sum /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p /root/logs
JOBS=3 BUDGET=430 bash benchmarks/gpu_smoke.sh /root/dcopy /root/logs/smoke > /root/logs/smoke.txt 2>&1
cat /root/logs/smoke.txt | tail -40
mkdir -p $OUT/smoke && cp /root/logs/smoke.txt $OUT/ && cp /root/logs/smoke/*.log $OUT/smoke/ 2>/dev/null
