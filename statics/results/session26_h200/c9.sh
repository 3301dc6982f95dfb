# W2 (Qwen2.5-1.5B's shape, random weights built here) beside TRL's GRPOTrainer (static cache), one call
export WANDB_MODE=disabled PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
t0=$SECONDS
python benchmarks/user_scale_models.py w2 /root/w2 --device cuda > /root/logs/w2_build.log 2>&1; echo build rc $? $((SECONDS-t0)) s
timeout 330 python benchmarks/user_scale.py --workload w2 --model /root/w2 --prompts-file /root/gsm8k_train.jsonl \
  --steps 2 --warmup 1 --trl-script benchmarks/trl_user_scale_baseline.py --trl-modes static --out /root/logs/w2.json \
  > /root/logs/w2.log 2>&1; echo w2 rc $? $((SECONDS-t0)) s
tail -4 /root/logs/w2.log | cut -c1-600; cp /root/logs/w2* $OUT/
