# what the chain has made so far, no models and not the carried labels: dense and search-training results, the
# verifiers' metrics, logs; in parts of 15 MB (cat i36.tgz.part-* | tar xz); and the report
cd /root/i36 && tar czf - --exclude='model' --exclude='checkpoint-*' --exclude='*.safetensors' --exclude='*.bin' \
  --exclude='*.pt' --exclude='*.pth' --exclude='./vl/labels/*.jsonl' . | split -b 15000000 - $OUT/i36.tgz.part- \
  && ls -la $OUT
cp /root/logs/i36.log $OUT/; cd /root/tree && PYTHONPATH=/root/tree:/tmp/site python benchmarks/issue36_gpu.py \
  /root/i36 --report > /dev/null && cp /root/i36/issue36.md $OUT/
cat /root/i36/dense/*/result.json /root/i36/search_training/*/result.json 2>/dev/null | head -c 3000
