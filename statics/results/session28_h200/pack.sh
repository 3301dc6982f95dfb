# what the chain has made so far, no models: labels, stats, verifier_eval, curve tables and records, summaries,
# logs; in parts of 15 MB (a file back is at most 16 MiB, 8 files a call): cat i36.tgz.part-* | tar xz
cd /root/i36 && tar czf - --exclude='model' --exclude='checkpoint-*' --exclude='*.safetensors' --exclude='*.bin' \
  --exclude='*.pt' --exclude='*.pth' . | split -b 15000000 - $OUT/i36.tgz.part- && ls -la $OUT
cp /root/logs/i36.log $OUT/; cd /root/tree && PYTHONPATH=/root/tree:/tmp/site python benchmarks/issue36_gpu.py /root/i36 \
  --report > /dev/null && cp /root/i36/issue36.md $OUT/; cat /root/i36/vl/curves/L2_at_maj.md 2>/dev/null
