"""Step-level training data for process reward models: StepPairs (a better and a worse sibling step under
the same prefix) and RatedSteps (steps with labels), from gold solutions with corrupted siblings
(`gold_corruption`), PRM800K's human ratings (`prm800k`) and Math-Shepherd-style rollouts with the
policy (`shepherd`)."""
from traindata.step_data.arithmetic_gold import arithmetic_steps
from traindata.step_data.gold_corruption import (
    KINDS, arithmetic_pairs, corruptions, gold_step_pairs, gsm8k_pairs, gsm8k_solution_steps,
)
from traindata.step_data.prm800k import load_prm800k
from traindata.step_data.shepherd import ShepherdConfig, ShepherdData, shepherd_data

__all__ = [
    "KINDS",
    "ShepherdConfig",
    "ShepherdData",
    "arithmetic_pairs",
    "arithmetic_steps",
    "corruptions",
    "gold_step_pairs",
    "gsm8k_pairs",
    "gsm8k_solution_steps",
    "load_prm800k",
    "shepherd_data",
]
