# levers against the default, each its own process (W4a at W4's 256-problem chunks; W4c in batches of 256)
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
cp .device/model-b/gsm8k_train.jsonl /root/m/
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
mkdir -p /root/logs/l
r() { n=$1; shift; local t0=$SECONDS; timeout 170 python benchmarks/w4_multistep.py --no-profile --measure_s 25 "$@" --label $n \
  --out /root/logs/l/$n.json > /root/logs/l/$n.log 2>&1; echo $n rc $? $((SECONDS-t0)) s; }
r a_default --workloads w4a
r a_joins --workloads w4a --decoder_set prefill_joins=true
r c_256 --workloads w4c --w4c_batch 256
python benchmarks/w4_multistep.py --compare /root/logs/l/a_default.json /root/logs/l/a_joins.json
grep -h '"full"' -A3 /root/logs/l/a_default.json | head -12
cd /root/logs/l && tar czf $OUT/levers_a.tgz *; ls -la $OUT
