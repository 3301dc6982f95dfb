# W1 + W4a-c: "before" = the today's code (07913d6), "after" = this tree (7513988); each in its own process,
# back to back on one card (the twenty-third session's c4.sh, with the occupancy counters on in "after")
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
cp .device/model-b/gsm8k_train.jsonl /root/m/
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled
mkdir -p /root/logs
D="--data_path /root/dcopy/hotpotqa --gsm8k /root/m/gsm8k_train.jsonl --measure_s 25"
PYTHONPATH=/root/base:/tmp/site timeout 250 python benchmarks/w4_multistep.py $D --label before --no-profile \
  --time_limit_s 215 --out /root/logs/w4_before.json > /root/logs/w4_before.log 2>&1; echo before rc $?
PYTHONPATH=$PWD:/tmp/site timeout 300 python benchmarks/w4_multistep.py $D --label after --decoder_set shape_steps={} \
  --time_limit_s 260 --out /root/logs/w4_after.json > /root/logs/w4_after.log 2>&1; echo after rc $?
grep -h "done in\|FAILED" /root/logs/w4_before.log /root/logs/w4_after.log
PYTHONPATH=$PWD:/tmp/site python benchmarks/w4_multistep.py --compare /root/logs/w4_before.json /root/logs/w4_after.json \
  > /root/logs/w4_compare.txt 2>&1; cat /root/logs/w4_compare.txt
cp /root/logs/w4_* $OUT/
