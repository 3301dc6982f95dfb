"""Step-level training data for process reward models: StepPairs (a better and a worse sibling step under
the same prefix) and RatedSteps (steps with labels), from gold solutions with corrupted siblings
(`gold_corruption`), PRM800K's human ratings (`prm800k`) and Math-Shepherd-style rollouts with the
policy (`shepherd`), and the policy's own samples with outcome and Monte-Carlo step labels for verifiers
(`policy_labels`, `labelled_samples`)."""
from lmgym.traindata.step_data.arithmetic_gold import arithmetic_steps
from lmgym.traindata.step_data.gold_corruption import (
    KINDS,
    arithmetic_pairs,
    corruptions,
    gold_step_pairs,
    gsm8k_pairs,
    gsm8k_solution_steps,
)
from lmgym.traindata.step_data.label_balance import (
    BALANCE_MODES,
    balanced_samples,
    balanced_sources,
    first_problems,
    label_balance,
    source_auc,
)
from lmgym.traindata.step_data.labelled_samples import (
    LabelledSample,
    PolicyLabels,
    load_policy_labels,
    outcome_items,
    outcome_pairs,
    save_policy_labels,
    step_items,
)
from lmgym.traindata.step_data.policy_labels import PolicyLabelConfig, policy_labels
from lmgym.traindata.step_data.prm800k import load_prm800k
from lmgym.traindata.step_data.shepherd import ShepherdConfig, ShepherdData, shepherd_data

__all__ = [
    "BALANCE_MODES",
    "KINDS",
    "LabelledSample",
    "PolicyLabelConfig",
    "PolicyLabels",
    "ShepherdConfig",
    "ShepherdData",
    "arithmetic_pairs",
    "balanced_samples",
    "balanced_sources",
    "first_problems",
    "label_balance",
    "source_auc",
    "arithmetic_steps",
    "corruptions",
    "gold_step_pairs",
    "gsm8k_pairs",
    "gsm8k_solution_steps",
    "load_policy_labels",
    "load_prm800k",
    "outcome_items",
    "outcome_pairs",
    "policy_labels",
    "save_policy_labels",
    "shepherd_data",
    "step_items",
]
