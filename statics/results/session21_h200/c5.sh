# gpu_smoke on this tree (every example's one-command GPU run, cut short), then W4b alone with 65,536 tokens a
# micro-batch (the update's launches: fewer, larger passes)
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONPATH=$PWD:/tmp/site
mkdir -p /root/logs/smoke
JOBS=3 BUDGET=430 timeout 450 bash benchmarks/gpu_smoke.sh /root/dcopy /root/logs/smoke > /root/logs/smoke.out 2>&1
echo smoke rc $?; cat /root/logs/smoke.out | tail -15
timeout 130 python benchmarks/w4_multistep.py --data_path /root/dcopy/hotpotqa --workloads w4b --w4b_iterations 3 \
  --measure_s 30 --no-profile --time_limit_s 110 --label mb65k --w4b_set max_tokens_per_microbatch=65536 \
  --out /root/logs/w4b_mb65k.json > /root/logs/w4b_mb65k.log 2>&1; echo mb65k rc $?; grep "done in\|measured" /root/logs/w4b_mb65k.log | tail -3
cp /root/logs/smoke.out /root/logs/w4b_mb65k.* $OUT/; (cd /root/logs/smoke && tar czf $OUT/smoke_logs.tgz *.log)
