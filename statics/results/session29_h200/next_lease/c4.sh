# wait on the chain (up to WAIT seconds, less when it ends), print its progress, and bring back what it has made.
# Run as a file (bash c4.sh): pgrep -f would match a command line that names the script it waits for.
WAIT=${WAIT:-540}
for i in $(seq $((WAIT / 10))); do pgrep -f "benchmarks/issue36_gpu.py /root/i36" > /dev/null || break; sleep 10; done
cat /root/logs/i36.log; tail -n 2 /root/i36/logs/*.log 2>/dev/null | cut -c1-200
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv
bash statics/results/session28_h200/next_lease/pack.sh
