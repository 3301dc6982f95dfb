set -x
cp .device/mini1/part /root/m/mini1 && ls /root/m
