"""lmgym/training/gc_pauses.py: training runs with its set-up frozen out of the collector's walks, unfrozen after
(also when it fails), re-entrant; the pauses counter counts collections."""
import gc
import weakref

import pytest

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.training.callbacks import TrainerCallback
from lmgym.training.gc_pauses import GcPauses, frozen_setup
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


class Node:
    """A reference cycle's member, so only the cyclic collector can free it."""

    def __init__(self):
        self.me = self


def test_what_lived_before_is_frozen_until_exit_and_what_came_after_is_collected():
    before = Node()
    gone_before = weakref.ref(before)
    with frozen_setup():
        assert gc.get_freeze_count() > 0
        after = Node()
        gone_after = weakref.ref(after)
        del before, after
        gc.collect()
        assert gone_after() is None  # made while training: collected as usual
        assert gone_before() is not None  # set-up's: frozen, not walked
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone_before() is None


def test_unfrozen_after_an_error_and_an_inner_use_leaves_the_outer_freeze():
    with pytest.raises(RuntimeError, match="boom"):
        with frozen_setup():
            raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0
    with frozen_setup():
        frozen = gc.get_freeze_count()
        with frozen_setup():
            pass
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == 0


def test_the_pauses_counter_counts_full_collections():
    with GcPauses() as pauses:
        gc.collect()
    assert pauses.collections[2] >= 1 and pauses.full_seconds > 0 and pauses.seconds >= pauses.full_seconds
    gc.collect()  # uninstalled: not counted
    assert pauses.snapshot()["collections"][2] == pauses.collections[2]


class FreezeSeen(TrainerCallback):
    def __init__(self):
        self.counts = []

    def on_iteration_end(self, trainer, metrics):
        self.counts.append(gc.get_freeze_count())


def test_training_iterations_run_with_the_setup_frozen(tiny_policy, tmp_path):
    seen = FreezeSeen()
    config = GRPOConfig(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                        micro_batch_size=4, eval_every=0, save_every=0, output_dir=str(tmp_path), progress=False)
    GRPO(tiny_policy, make("ToyDigits-v0"), config, callbacks=[seen]).train()
    assert len(seen.counts) == 2 and min(seen.counts) > 0
    assert gc.get_freeze_count() == 0
