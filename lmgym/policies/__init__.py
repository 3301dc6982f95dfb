"""Policies: Hugging Face causal LMs as RL policies, sampling, scoring, model loading, and the process reward model."""
from lmgym.policies.adapter_roles import AdapterRole, add_adapter
from lmgym.policies.base import BackbonePolicy, DataParallelPolicy, Policy, TrainableModel, TrainablePolicy
from lmgym.policies.contract import check_contract
from lmgym.policies.decoding.generation import Generation
from lmgym.policies.few_shot import FewShotStepwisePolicy
from lmgym.policies.hf import HFPolicy, LoraSettings
from lmgym.policies.loading import *  # noqa: F403 - the model-loading names, exported here too
from lmgym.policies.loading import __all__ as _LOADING_NAMES
from lmgym.policies.loading.hub import EMBEDDED_HUB_ID, push_folder
from lmgym.policies.loading.model_card import TrainingDetails, build_model_card, write_model_card
from lmgym.policies.prm import ProcessRewardModel, aggregate_step_scores
from lmgym.policies.prompting import pad_id, prompt_ids
from lmgym.policies.turn_batches import encode_turns

__all__ = [
    "Policy", "TrainableModel", "TrainablePolicy", "DataParallelPolicy", "BackbonePolicy", "check_contract",
    "AdapterRole", "add_adapter", "Generation", "HFPolicy", "FewShotStepwisePolicy", "LoraSettings",
    *_LOADING_NAMES,
    "ProcessRewardModel", "aggregate_step_scores", "prompt_ids", "pad_id", "encode_turns",
    "EMBEDDED_HUB_ID", "push_folder", "TrainingDetails", "build_model_card", "write_model_card",
]
