set -x
cp .device/mini1/part /root/m/mini1 && rm -rf /root/base && cp -r .device/base /root/base && ls /root/base /root/m
