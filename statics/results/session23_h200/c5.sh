# gpu_smoke on this tree (every example's one-command GPU run, cut short) and, beside it on the card, reflection's
# gpu_room run (the checked critic, seed 0: issue 26's figure, rerun with the new engine)
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
mkdir -p /root/logs/smoke /root/runs
(timeout 1000 python examples/reflection_dpo.py --preset gpu_room --output_dir /root/runs/refl --no-progress \
  > /root/logs/reflection.log 2>&1; echo "reflection rc $?" >> /root/logs/reflection.log) &
JOBS=3 BUDGET=430 timeout 450 bash benchmarks/gpu_smoke.sh /root/dcopy /root/logs/smoke > /root/logs/smoke.out 2>&1
echo smoke rc $?; tail -15 /root/logs/smoke.out
sleep 60; tail -5 /root/logs/reflection.log
cp /root/logs/smoke.out /root/logs/reflection.log $OUT/; (cd /root/logs/smoke && tar czf $OUT/smoke_logs.tgz *.log)
tar czf $OUT/refl.tgz --exclude="*.safetensors" --exclude="*.bin" --exclude="*.pt" --exclude="*.pth" -C /root/runs refl 2>/dev/null; ls -la $OUT
