"""The variable-length passes keep cuDNN's attention (a host-side plan per new shape) out; the CPU is untouched."""
from contextlib import nullcontext

import torch

from lmgym.policies.padded_passes import variable_length_attention


def test_cuda_passes_exclude_cudnn_attention_and_restore_the_choice_after():
    before = torch.backends.cuda.cudnn_sdp_enabled()
    with variable_length_attention(torch.device("cuda")):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled() == before


def test_nothing_changes_on_the_cpu():
    assert isinstance(variable_length_attention(torch.device("cpu")), nullcontext)
