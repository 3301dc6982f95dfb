# W4b and W4c: overlap_generate against the default, each its own process
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
r() { n=$1; shift; local t0=$SECONDS; timeout 200 python benchmarks/w4_multistep.py --no-profile --measure_s 25 "$@" --label $n \
  --out /root/logs/l/$n.json > /root/logs/l/$n.log 2>&1; echo $n rc $? $((SECONDS-t0)) s; }
r bc_default --workloads w4b,w4c --data_path /root/dcopy/hotpotqa
r bc_overlap --workloads w4b,w4c --data_path /root/dcopy/hotpotqa --decoder_set overlap_generate=true
python benchmarks/w4_multistep.py --compare /root/logs/l/bc_default.json /root/logs/l/bc_overlap.json
python benchmarks/w4_multistep.py --compare /root/logs/l/bc_default.json /root/logs/l/c_256.json
cd /root/logs/l && tar czf $OUT/levers_b.tgz *; ls -la $OUT
