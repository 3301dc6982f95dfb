# W4b and W4c again, 07913d6 (copy) then this tree, one call: a second before/after round
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1
D="--data_path /root/dcopy/hotpotqa --workloads w4b,w4c --measure_s 25 --no-profile"
PYTHONPATH=/root/base:/tmp/site timeout 200 python benchmarks/w4_multistep.py $D --label before \
  --out /root/logs/bc_before2.json > /root/logs/bc_before2.log 2>&1; echo before rc $?
PYTHONPATH=$PWD:/tmp/site timeout 200 python benchmarks/w4_multistep.py $D --label after \
  --out /root/logs/bc_after2.json > /root/logs/bc_after2.log 2>&1; echo after rc $?
PYTHONPATH=$PWD:/tmp/site python benchmarks/w4_multistep.py --compare /root/logs/bc_before2.json /root/logs/bc_after2.json
cp /root/logs/bc_*2.* $OUT/
