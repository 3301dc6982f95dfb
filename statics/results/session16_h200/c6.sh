# after: this tree (compiled prefill), W1 + W4a + W4b, then the comparison
export PYTHONPATH=$PWD:/tmp/site RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf
timeout 430 python benchmarks/w4_multistep.py --data_path /root/dcopy/hotpotqa --gsm8k /root/m/gsm8k_train.jsonl \
  --workloads w1,w4a,w4b --w4b_iterations 4 --label after --measure_s 25 --time_limit_s 270 \
  --out /root/logs/w4_after.json > /root/logs/w4_after.log 2>&1; echo rc $?
tail -30 /root/logs/w4_after.log
python benchmarks/w4_multistep.py --compare /root/logs/w4_before.json /root/logs/w4_after.json > /root/logs/w4_compare.txt 2>&1
cat /root/logs/w4_compare.txt; cp /root/logs/w4_after.* /root/logs/w4_compare.txt /root/logs/w4_before.json $OUT/
