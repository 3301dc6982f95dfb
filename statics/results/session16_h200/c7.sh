export PYTHONPATH=$PWD:/tmp/site RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled
( time timeout 540 python examples/verifier_loop.py --preset gpu --stages label --train_levels 3 --test_levels 2 \
   --output_dir /root/logs/vl --no-progress ) > /root/logs/vl_label.log 2>&1; echo rc $?
tail -25 /root/logs/vl_label.log; ls -la /root/logs/vl /root/logs/vl/labels
mkdir -p $OUT/vl && cp /root/logs/vl_label.log $OUT/vl/ && for f in /root/logs/vl/labels/*.jsonl; do gzip -c $f > $OUT/vl/$(basename $f).gz; done
cp /root/logs/vl/*.json $OUT/vl/ 2>/dev/null; ls -la $OUT/vl
