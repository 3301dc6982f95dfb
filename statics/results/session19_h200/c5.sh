# ran on a tree with lazy compaction (FastDecoder.lazy_compaction), tried this session and reverted: see RESULTS.md
# W1 + W4a + W4b with eager compaction (`bash c5.sh eager`, before) or lazy compaction (`bash c5.sh lazy`, the
# new CUDA default), one call each, back to back on one lease; the second call compares them
[ -f /root/m/SmolLM2-135M-Instruct.Q4_1.gguf ] || cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f /root/m/gsm8k_train.jsonl ] || cp .device/model-b/gsm8k_train.jsonl /root/m/
export PYTHONPATH=$PWD:/tmp/site RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled
mkdir -p /root/logs
name=$1; flag=""; [ "$name" = eager ] && flag="--decoder_set lazy_compaction=false"
timeout 560 python benchmarks/w4_multistep.py --data_path /root/dcopy/hotpotqa --gsm8k /root/m/gsm8k_train.jsonl \
  --workloads w1,w4a,w4b --w4b_iterations 4 --label $name $flag --measure_s 25 --time_limit_s 420 \
  --out /root/logs/w4_$name.json > /root/logs/w4_$name.log 2>&1; echo $name rc $?
grep -E "done in|chunk|FAILED" /root/logs/w4_$name.log | head -30
cp /root/logs/w4_$name.* $OUT/
if [ -f /root/logs/w4_eager.json ] && [ -f /root/logs/w4_lazy.json ]; then
  python benchmarks/w4_multistep.py --compare /root/logs/w4_eager.json /root/logs/w4_lazy.json > $OUT/w4_lazy_compare.txt 2>&1
  cat $OUT/w4_lazy_compare.txt
fi
