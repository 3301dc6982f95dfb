# W4a: the default against the two tail levers built after the last lease and a larger kept-bucket budget, each in
# its own process, back to back; the default again at the end (noise)
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
mkdir -p /root/logs/a
A="--workloads w4a --w4a_problems 128 --measure_s 30 --no-profile --decoder_set shape_steps={}"
r() { n=$1; shift; timeout 130 python benchmarks/w4_multistep.py $A "$@" --label $n --out /root/logs/a/$n.json > /root/logs/a/$n.log 2>&1; echo $n rc $?; }
r a0
r tail2 --decoder_set tail_sync_every=2
r cache56 --decode_cache_gb 56
r a0b
grep -h "tok/s\|done in" /root/logs/a/*.log | grep -v "^|" | head
for n in tail2 cache56 a0b; do python benchmarks/w4_multistep.py --compare /root/logs/a/a0.json /root/logs/a/$n.json | grep -i w4a; done
cd /root/logs/a && tar czf $OUT/w4a_levers.tgz *; ls -la $OUT
