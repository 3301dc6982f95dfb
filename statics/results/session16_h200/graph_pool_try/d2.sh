rm -rf /root/base && cp -r .device/base /root/base && python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/wheels/*.whl 2>&1 | tail -2; ls /root/base /tmp/site | head
