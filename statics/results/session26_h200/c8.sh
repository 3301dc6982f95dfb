# W2 setup on a fresh machine: the wheels (TRL among them) and the GSM8K train file
set -x
mkdir -p /root/logs && python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/wheels/*.whl 2>&1 | tail -3
cp .device/data/gsm8k/train.jsonl /root/gsm8k_train.jsonl && ls -la /root/gsm8k_train.jsonl
