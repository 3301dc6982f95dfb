# levers against the default, each its own process, back to back (W4a at W4's 256-problem chunks)
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
cp .device/model-b/gsm8k_train.jsonl /root/m/
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
mkdir -p /root/logs/l
r() { n=$1; shift; timeout 150 python benchmarks/w4_multistep.py --no-profile --measure_s 25 "$@" --label $n \
  --out /root/logs/l/$n.json > /root/logs/l/$n.log 2>&1; echo $n rc $?; }
r a_default --workloads w4a
r a_joins --workloads w4a --decoder_set prefill_joins=true
r bc_default --workloads w4b,w4c --data_path /root/dcopy/hotpotqa
r bc_overlap --workloads w4b,w4c --data_path /root/dcopy/hotpotqa --decoder_set overlap_generate=true
r c_256 --workloads w4c --w4c_batch 256
python benchmarks/w4_multistep.py --compare /root/logs/l/a_default.json /root/logs/l/a_joins.json
python benchmarks/w4_multistep.py --compare /root/logs/l/bc_default.json /root/logs/l/bc_overlap.json
python benchmarks/w4_multistep.py --compare /root/logs/l/bc_default.json /root/logs/l/c_256.json
grep -h '"full"' -A3 /root/logs/l/a_default.json | head -12
cd /root/logs/l && tar czf $OUT/levers.tgz *; ls -la $OUT
