"""Process reward models in training: the PRM's own trainer and losses (`trainer`), verifiers of each kind trained
on labelled samples (`verifier_training`), a PRM's step scores in an RL reward (`reward`, `step_credit`), GRPO's
process credit (`process_credit`) and the verifier refreshed on the policy's own samples during RL (`refresh`)."""
