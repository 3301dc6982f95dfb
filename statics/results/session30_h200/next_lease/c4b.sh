# chain B, once chain A's critic and evaluate are done (its log says so): every curve not run yet, three at a time,
# beside chain A's seeds; MINUTES = the lease's minutes left less 3. Then wait as c4.sh does. Run as a file:
#   MINUTES=16 WAIT=560 bash statics/results/session30_h200/next_lease/c4b.sh
ONLY=curves_mcts,curves_mcts_critic,curves_critic,curves_weighted,curves_best_of_n,curves_beam PARALLEL=3 \
  MINUTES=${MINUTES:-16} LOG=i36b.log WAIT=${WAIT:-560} bash statics/results/session30_h200/next_lease/chain.sh
