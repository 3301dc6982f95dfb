"""No deprecated calls of ours warn: DDP's buffer option (torch 2.13: `broadcast_buffers` -> `forward_sync_buffers`)
and activation checkpointing (transformers 5: `gradient_checkpointing_enable` -> `activation_checkpointing_enable`)."""
import warnings

import torch
import torch.distributed as td

from lmgym.policies import build_tiny_model, build_tiny_tokenizer
from lmgym.policies.padded_passes import checkpointed_layers, enable_activation_checkpointing
from lmgym.training.data_parallel import wrap
from tests.two_ranks import free_port


def test_ddp_is_built_without_a_deprecation_warning_and_without_buffer_sync_in_forward(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    td.init_process_group("gloo", rank=0, world_size=1)
    try:
        model = build_tiny_model(build_tiny_tokenizer(), seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            ddp = wrap(model)
        assert not ddp.will_sync_module_buffers()  # no collective in forward: ranks may run different passes
        ddp(input_ids=torch.tensor([[1, 2, 3]]))
    finally:
        td.destroy_process_group()


def test_activation_checkpointing_is_enabled_without_a_deprecation_warning():
    model = build_tiny_model(build_tiny_tokenizer(), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        enable_activation_checkpointing(model)
    assert checkpointed_layers(model) == model.config.num_hidden_layers
