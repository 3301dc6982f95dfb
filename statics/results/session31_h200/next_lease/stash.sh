# before the lease (run from the repository root): move statics/results/* out of the tree (64 MiB carry) except what
# the calls read: session28_h200 (the labels), session29_h200 (c1.sh, c2.sh, c4.sh), and of session31_h200 these
# scripts and its five GRPO runs. After the lease: bash statics/results/session31_h200/next_lease/stash.sh back
S=/work/stash_results
if [ "$1" = back ]; then
  for d in $S/*; do case $d in $S/s31) ;; *) mv "$d" statics/results/;; esac; done
  cp -r $S/s31/. statics/results/session31_h200/ && rm -rf $S/s31; git status --short | head; exit 0
fi
mkdir -p $S/s31/i36/search_training
for d in statics/results/*; do case $d in
  *session28_h200|*session29_h200) ;;
  *session31_h200)
    for x in $d/*; do case $x in */i36|*/next_lease) ;; *) mv "$x" $S/s31/;; esac; done
    for x in $d/i36/*; do case $x in */search_training) ;; *) mv "$x" $S/s31/i36/;; esac; done
    for x in $d/i36/search_training/*; do case $x in */GRPO-seed?) ;; *) mv "$x" $S/s31/i36/search_training/;; esac; done;;
  *) mv "$d" $S/;; esac; done
du -sh statics/results/*
