# W4c alone, before/after/before/after, more problems a run (c4's W4c chunks were 1-3 s each: too few to compare)
export RLGYM_EMBEDDED_GGUF=/root/m/SmolLM2-135M-Instruct.Q4_1.gguf WANDB_MODE=disabled
for run in before1 after1 before2 after2; do
  case $run in before*) P=/root/base:/tmp/site;; *) P=$PWD:/tmp/site;; esac
  PYTHONPATH=$P timeout 100 python benchmarks/w4_multistep.py --workloads w4c --w4c_problems 1024 --measure_s 30 \
    --no-profile --time_limit_s 90 --label $run --out /root/logs/w4c_$run.json > /root/logs/w4c_$run.log 2>&1
  echo $run rc $?; grep -h "done in" /root/logs/w4c_$run.log
done
for r in 1 2; do PYTHONPATH=$PWD:/tmp/site python benchmarks/w4_multistep.py --compare /root/logs/w4c_before$r.json \
  /root/logs/w4c_after$r.json 2>&1 | grep "w4c |"; done
cp /root/logs/w4c_* $OUT/
