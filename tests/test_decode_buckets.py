"""The fast decoder's decode shapes come from a small set of buckets that covers every length the examples' presets
produce: each call's bucket holds its prompts and new tokens, and a long run of calls captures few graphs."""
import random

import pytest

from lmgym.policies import build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding.fast import FastDecoder
from tests.tiers import slow

# (rows a call, prompt tokens, new tokens, rows that share a prompt) of the presets' multi-step workloads
PRESET_CALLS = {
    "policy labels (W4a)": (2048, (150, 700), 64, 4),
    "rag agent GRPO (W4b)": (128, (150, 1800), 64, 8),
    "reflection eval (W4c)": (256, (100, 1200), 64, 1),
    "W1": (128, (60, 300), 256, 8),
    "cpu presets": (16, (20, 400), 24, 4),
}


@pytest.fixture(scope="module")
def decoder():
    tok = build_tiny_tokenizer()
    return FastDecoder(build_tiny_model(tok).eval())


def calls(rows, lengths, share, seed):
    rng = random.Random(seed)
    for _ in range(60):
        prefix_length = rng.randint(*lengths)
        shared = [rng.randrange(90) for _ in range(prefix_length)]
        prompts = []
        for _ in range(max(rows // share, 1)):
            own = [rng.randrange(90) for _ in range(rng.randint(1, 40))]
            prompts += [shared[:rng.randint(prefix_length // 2, prefix_length)] + own] * share
        yield prompts[:rows]


@slow
@pytest.mark.parametrize("preset", sorted(PRESET_CALLS))
def test_every_call_fits_its_bucket_and_buckets_are_few(decoder, preset):
    rows, lengths, new_tokens, share = PRESET_CALLS[preset]
    keys = set()
    for prompts in calls(rows, lengths, share, seed=len(preset)):
        key, groups = decoder.bucket_key(prompts, new_tokens)
        keys.add(key)
        if key[0] == "grouped":
            _, group_count, members, prefix_columns, own_columns = key
            assert group_count >= len(groups) and members >= max(len(m) for m, _ in groups)
            assert all(shared <= prefix_columns for _, shared in groups)
            assert all(len(prompts[i]) - shared + new_tokens <= own_columns for m, shared in groups for i in m)
        else:
            assert key[0] >= len(prompts) and key[1] >= max(map(len, prompts)) + new_tokens
    assert len(keys) <= 24, sorted(keys, key=str)  # 60 calls of lengths across the preset's range
