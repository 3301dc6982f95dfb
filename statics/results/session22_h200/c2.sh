# W4a alone: "before" = 0be5e51 (the twenty-first session's main), "after" = this tree (the heap frozen while
# labelling, plain integers graded without normalising, reward contexts copied by deep_copy); each in its own
# process, back to back on one card
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled
rm -rf /root/base && cp -r .device/base22 /root/base
D="--workloads w4a --w4a_problems 192 --measure_s 40 --no-profile"
PYTHONPATH=/root/base:/tmp/site timeout 200 python benchmarks/w4_multistep.py $D --label before --time_limit_s 170 \
  --out /root/logs/w4a_before.json > /root/logs/w4a_before.log 2>&1; echo before rc $?
PYTHONPATH=$PWD:/tmp/site timeout 200 python benchmarks/w4_multistep.py $D --label after --time_limit_s 170 \
  --out /root/logs/w4a_after.json > /root/logs/w4a_after.log 2>&1; echo after rc $?
tail -3 /root/logs/w4a_before.log /root/logs/w4a_after.log
PYTHONPATH=$PWD:/tmp/site python benchmarks/w4_multistep.py --compare /root/logs/w4a_before.json /root/logs/w4a_after.json \
  > /root/logs/w4a_compare.txt 2>&1; cat /root/logs/w4a_compare.txt
cp /root/logs/w4a_* $OUT/
