# "before" again: c4's run of 07913d6 failed at the harness's decoder counters (older code keeps none; fixed)
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled
D="--data_path /root/dcopy/hotpotqa --gsm8k /root/m/gsm8k_train.jsonl --measure_s 25"
PYTHONPATH=/root/base:/tmp/site timeout 280 python benchmarks/w4_multistep.py $D --label before --no-profile \
  --time_limit_s 240 --out /root/logs/w4_before.json > /root/logs/w4_before.log 2>&1; echo before rc $?
grep -h "done in\|FAILED" /root/logs/w4_before.log
PYTHONPATH=$PWD:/tmp/site python benchmarks/w4_multistep.py --compare /root/logs/w4_before.json /root/logs/w4_after.json \
  > /root/logs/w4_compare.txt 2>&1; cat /root/logs/w4_compare.txt
cp /root/logs/w4_before.* /root/logs/w4_compare.txt $OUT/
