# the results, no models: stats, balance, verifier_eval, curve tables and records, summaries, logs
cd /root/i36 && tar czf $OUT/i36.tgz --exclude='model' --exclude='checkpoint-*' --exclude='*.safetensors' \
  --exclude='*.bin' --exclude='*.pt' --exclude='*.pth' . && ls -la $OUT
cp /root/logs/i36.log $OUT/; cat vl/curves/L2_at_maj.md 2>/dev/null; cat vl/labels/stats.json 2>/dev/null | head -40
