export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf
here=$PWD
(cd /root/base && PYTHONPATH=/root/base:/tmp/site timeout 200 python benchmarks/w4_multistep.py --data_path /root/dcopy/hotpotqa --gsm8k /root/m/gsm8k_train.jsonl \
  --workloads w4c --label before --measure_s 20 --time_limit_s 150 --out /root/logs/w4c_before.json > /root/logs/w4c_before.log 2>&1; echo rc $?)
tail -12 /root/logs/w4c_before.log; cp /root/logs/w4c_before.* $OUT/
PYTHONPATH=$here:/tmp/site timeout 210 python benchmarks/w4_multistep.py --data_path /root/dcopy/hotpotqa --gsm8k /root/m/gsm8k_train.jsonl \
  --workloads w4c --label after --measure_s 20 --time_limit_s 160 --out /root/logs/w4c_after.json > /root/logs/w4c_after.log 2>&1; echo rc $?
tail -12 /root/logs/w4c_after.log; cp /root/logs/w4c_after.* $OUT/
PYTHONPATH=$here:/tmp/site python benchmarks/w4_multistep.py --compare /root/logs/w4c_before.json /root/logs/w4c_after.json 2>&1 | tee $OUT/w4c_compare.txt
