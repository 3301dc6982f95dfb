# wait on the chain (up to 9.5 min, less when it ends), then its progress
for i in $(seq 57); do pgrep -f issue36_gpu.py > /dev/null || break; sleep 10; done
cat /root/logs/i36.log; tail -n 2 /root/i36/logs/*.log 2>/dev/null | cut -c1-200
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv
