# the verifier loop at issue 25's scale (256 train problems a level, curves on 128), rerun with the new engine, in
# one process; reflection (started in c5) finishes beside it
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
timeout ${VL_S:-520} python examples/verifier_loop.py --preset gpu --output_dir /root/runs/vl --no-progress \
  --label_problems 256 --curve_problems 128 --budgets 96,192,384,768 > /root/logs/vl.log 2>&1; echo vl rc $?
tail -30 /root/logs/vl.log; tail -30 /root/logs/reflection.log
cp /root/logs/vl.log /root/logs/reflection.log $OUT/
tar czf $OUT/vl.tgz --exclude="*.safetensors" --exclude="*.bin" --exclude="*.pt" --exclude="*.pth" --exclude="checkpoint-*" -C /root/runs vl
tar czf $OUT/refl.tgz --exclude="*.safetensors" --exclude="*.bin" --exclude="*.pt" --exclude="*.pth" --exclude="checkpoint-*" -C /root/runs refl
ls -la $OUT
