# before the lease (run from the repository root): move statics/results/* out of the tree (64 MiB carry) except what
# the calls read: session28_h200 (the labels, pack.sh), session29_h200 (c1.sh, c2.sh, c4.sh), session31_h200's
# next_lease (chain.sh) and this folder.
# After the lease: bash statics/results/session32_h200/next_lease/stash.sh back
S=/work/stash_results
if [ "$1" = back ]; then
  for d in $S/*; do case $d in $S/s31|$S/s32) ;; *) mv "$d" statics/results/;; esac; done
  cp -r $S/s31/. statics/results/session31_h200/ && rm -rf $S/s31
  cp -r $S/s32/. statics/results/session32_h200/ && rm -rf $S/s32; git status --short | head; exit 0
fi
mkdir -p $S/s31 $S/s32
for d in statics/results/*; do case $d in
  *session28_h200|*session29_h200) ;;
  *session31_h200) for x in $d/*; do case $x in */next_lease) ;; *) mv "$x" $S/s31/;; esac; done;;
  *session32_h200) for x in $d/*; do case $x in */next_lease) ;; *) mv "$x" $S/s32/;; esac; done;;
  *) mv "$d" $S/;; esac; done
du -sh statics/results/*
