set -x
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/wheels/*.whl 2>&1 | tail -3; ls /tmp/site | head
