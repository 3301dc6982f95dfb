set -x
mkdir -p /root/m /root/logs && cp .device/model-a/part /root/m/a && ls -la /root/m; nvidia-smi --query-gpu=name,memory.used --format=csv
