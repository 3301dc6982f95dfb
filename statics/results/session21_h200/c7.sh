# a second lease: W4b alone on 0600c32 (the update's log-probs on the sampled tokens alone), the settings of c4's W4b
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled PYTHONPATH=$PWD:/tmp/site
mkdir -p /root/logs
timeout 150 python benchmarks/w4_multistep.py --data_path /root/dcopy/hotpotqa --workloads w4b --w4b_iterations 4 \
  --measure_s 25 --no-profile --time_limit_s 130 --label packed --out /root/logs/w4b_packed.json \
  > /root/logs/w4b_packed.log 2>&1; echo packed rc $?; grep "done in\|FAILED" /root/logs/w4b_packed.log
python3 -c "
import json; d=json.load(open('/root/logs/w4b_packed.json'))['workloads']['w4b']
print(round(d['measured']['generated_tok_per_s']), d['peak_mem_gb'])
for c in d['chunks']: print(round(c['seconds'],2), {k: round(v,2) for k,v in c['trainer_s'].items()})"
cp /root/logs/w4b_packed.* $OUT/
