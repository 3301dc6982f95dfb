# before: main at 3fbf597 (carried as .device/base in c2), W1 + W4a + W4b
export PYTHONPATH=/root/base:/tmp/site RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf
cd /root/base && timeout 400 python benchmarks/w4_multistep.py --data_path /root/dcopy/hotpotqa --gsm8k /root/m/gsm8k_train.jsonl \
  --workloads w1,w4a,w4b --w4b_iterations 4 --label before --measure_s 25 --time_limit_s 250 \
  --out /root/logs/w4_before.json > /root/logs/w4_before.log 2>&1; echo rc $?
tail -30 /root/logs/w4_before.log; cp /root/logs/w4_before.* $OUT/
