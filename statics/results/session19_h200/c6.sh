# W4a with the labelling's new kept-bucket budget (PolicyLabelConfig.kept_cache_share 0.4, the default) against
# the decoder's usual sixteenth (share 0); one lease, back to back (W1 does not label: not rerun)
cat /root/m/a .device/model-b/part > /root/m/SmolLM2-135M-Instruct.Q4_1.gguf
cp .device/model-b/gsm8k_train.jsonl /root/m/
export PYTHONPATH=$PWD:/tmp/site RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled
mkdir -p /root/logs
timeout 100 python benchmarks/w4_multistep.py --workloads w4a --w4a_problems 128 --no-profile --measure_s 60 \
  --label_kept_cache_share 0 --label usual --out /root/logs/w4a_usual.json > /root/logs/w4a_usual.log 2>&1; echo usual rc $?
timeout 100 python benchmarks/w4_multistep.py --gsm8k /root/m/gsm8k_train.jsonl --workloads w4a --w4a_problems 128 \
  --no-profile --measure_s 60 --label kept --out /root/logs/w4a_kept.json > /root/logs/w4a_kept.log 2>&1; echo kept rc $?
for v in usual kept; do python3 -c "
import json; d=json.load(open('/root/logs/w4a_$v.json'))['workloads']; r=d['w4a']
print('$v', r['settings'].get('kept_cache_share'), 'peak', round(r['peak_mem_gb'],1), round(r['measured']['generated_tok_per_s']), [(round(c['seconds'],1), round(c['generated_tokens']/c['seconds']), c['decoder']['buckets_made']) for c in r['warmup']+r['chunks']])
if 'w1' in d: print('W1', {k: d['w1'].get(k) for k in ('completion_tok_per_s','peak_mem_gb','error') if k in d['w1']})"; done
python benchmarks/w4_multistep.py --compare /root/logs/w4a_usual.json /root/logs/w4a_kept.json 2>&1 | tail -4
cp /root/logs/w4a_usual.* /root/logs/w4a_kept.* $OUT/
