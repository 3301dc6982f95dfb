# W4a in chunks of 128 problems as two labelling batches of 64: without and with overlap_batches (and with it and
# tail_sync_every=2), each its own process
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
mkdir -p /root/logs/b
B="--workloads w4a --w4a_problems 256 --w4a_batch 128 --w4a_set batch_size=64 --measure_s 40 --no-profile --decoder_set shape_steps={}"
r() { n=$1; shift; timeout 170 python benchmarks/w4_multistep.py $B "$@" --label $n --out /root/logs/b/$n.json > /root/logs/b/$n.log 2>&1; echo $n rc $?; }
r b0
r overlap --w4a_set overlap_batches=true
r overlap_tail2 --w4a_set overlap_batches=true --decoder_set tail_sync_every=2
for n in overlap overlap_tail2; do python benchmarks/w4_multistep.py --compare /root/logs/b/b0.json /root/logs/b/$n.json | grep -i w4a; done
cd /root/logs/b && tar czf $OUT/w4a_overlap.tgz *; ls -la $OUT
