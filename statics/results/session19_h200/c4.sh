# gguf, then W4a + W4b with the decoder's default kept-bucket budget (a sixteenth of the card) and with 40 GB
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
cp .device/model-b/gsm8k_train.jsonl /root/m/
export PYTHONPATH=$PWD:/tmp/site RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled
mkdir -p /root/logs
for v in default:"" cache40:"--decode_cache_gb 40"; do
  name=${v%%:*}; flag=${v#*:}
  timeout 270 python benchmarks/w4_multistep.py --data_path /root/dcopy/hotpotqa --gsm8k /root/m/gsm8k_train.jsonl \
    --workloads w4a,w4b --w4b_iterations 4 --label $name $flag --measure_s 25 --time_limit_s 200 \
    --out /root/logs/w4_$name.json > /root/logs/w4_$name.log 2>&1; echo $name rc $?
  grep -E "done in|measured chunk" /root/logs/w4_$name.log
done
python benchmarks/w4_multistep.py --compare /root/logs/w4_default.json /root/logs/w4_cache40.json > /root/logs/w4_compare.txt 2>&1
cat /root/logs/w4_compare.txt; cp /root/logs/w4_* $OUT/
