# W1 alone: 07913d6 (the code) against this tree, alternating, two rounds, each its own process
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONUNBUFFERED=1
SITE=/tmp/site ROUNDS=2 STEPS=6 timeout 560 bash benchmarks/w1_ab.sh /root/logs/ab /root/base /root/m/gsm8k_train.jsonl
echo ab rc $?
grep -h "median\|step" /root/logs/ab/w1_after1.log | tail -5
cd /root/logs/ab && tar czf $OUT/w1_ab.tgz *; ls -la $OUT
