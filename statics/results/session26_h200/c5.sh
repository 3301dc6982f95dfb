# W1 + W4 against the code (07913d6 as a copy), one call; WIN: the --decoder_set flags c4 kept
WIN=""
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1
D="--data_path /root/dcopy/hotpotqa --gsm8k /root/m/gsm8k_train.jsonl --measure_s 25"
PYTHONPATH=/root/base:/tmp/site timeout 260 python benchmarks/w4_multistep.py $D --label before --no-profile \
  --time_limit_s 240 --out /root/logs/w4_before.json > /root/logs/w4_before.log 2>&1; echo before rc $?
PYTHONPATH=$PWD:/tmp/site timeout 320 python benchmarks/w4_multistep.py $D $WIN --label after \
  --time_limit_s 290 --out /root/logs/w4_after.json > /root/logs/w4_after.log 2>&1; echo after rc $?
PYTHONPATH=$PWD:/tmp/site python benchmarks/w4_multistep.py --compare /root/logs/w4_before.json /root/logs/w4_after.json
cp /root/logs/w4_* $OUT/
