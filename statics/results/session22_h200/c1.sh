set -x
mkdir -p /root/m /root/logs && cp .device/model-a/part /root/m/a && python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/wheels/*.whl; ls /tmp/site | head -30; nvidia-smi --query-gpu=name,memory.used --format=csv
