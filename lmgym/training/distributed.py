"""torch.distributed helpers; every function is a no-op in a single process.

Launch with `torchrun --nproc_per_node N script.py`: `init_from_env` (called by every example and by
`Trainer.__init__`) joins the process group; each rank collects `prompts_per_iteration / N` whole
groups of the global batch, token counts are all-reduced so the loss normaliser is global, gradients
are averaged with one all-reduce per optimizer step, and rank 0 alone evaluates, logs and writes the
run folder.
"""
from __future__ import annotations

import atexit
import gc
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch
import torch.distributed as td

T = TypeVar("T")

# The ranks every helper below works over: None, every rank; else the trainer ranks' group when rollout workers
# take some ranks (training/rollout_workers/roles.py), and on a rollout rank a group of its own ("main": False).
_SCOPE: dict[str, Any] = {"group": None, "main": True}


def use_group(group, main: bool = True) -> None:
    """Make every helper work over `group` (None: the whole world); `main=False` makes `is_main()` False here."""
    _SCOPE.update(group=group, main=main)


def group():
    """The process group the helpers work over (None: the default, every rank)."""
    return _SCOPE["group"]


def _src() -> int:
    """The global rank of the group's first rank (collectives name their source by global rank)."""
    return 0 if group() is None else td.get_global_rank(group(), 0)


def is_initialized() -> bool:
    return td.is_available() and td.is_initialized()


def rank() -> int:
    return td.get_rank(group()) if is_initialized() else 0


def world_size() -> int:
    return td.get_world_size(group()) if is_initialized() else 1


def is_main() -> bool:
    return rank() == 0 and _SCOPE["main"]


def launched() -> bool:
    """True in a process started by torchrun (RANK and WORLD_SIZE set)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def restart_count() -> int:
    """How many times torchrun has restarted this job's workers (TORCHELASTIC_RESTART_COUNT: 0 on the first
    start, and outside torchrun). A value that is not a whole number >= 0 is one ValueError line."""
    text = os.environ.get("TORCHELASTIC_RESTART_COUNT", "").strip() or "0"
    if not text.isdigit():
        raise ValueError(f"TORCHELASTIC_RESTART_COUNT must be a whole number >= 0 (torchrun sets it), got {text!r}")
    return int(text)


def restart_store() -> td.Store | None:
    """The store a process group restarted by torchrun joins over, or None for the usual env:// rendezvous.

    torchrun's agent keeps one TCP store across restarts and its workers join it without a key prefix of the
    attempt (pytorch/pytorch#135712), so after a restart a rank may read the killed attempt's gloo addresses (or
    NCCL id) and connect to a dead process. On one node (one agent) every worker has the same restart count, so
    the keys get it as a prefix here. Across nodes the agents count restarts apart; there
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 in torchrun's environment gives each rendezvous a store of its own
    (docs/scale-out.md), and a restarted rank without it gets a one-line warning."""
    restart = restart_count()
    if not restart or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    if os.environ.get("GROUP_WORLD_SIZE", "1") != "1":
        print("warning: torchrun restarted this rank on one of several nodes while they share the agents' store; "
              "set TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 for torchrun, or the ranks may meet a dead attempt's "
              "addresses (pytorch/pytorch#135712)", file=sys.stderr, flush=True)
        return None
    from torch.distributed.constants import default_pg_timeout

    shared = td.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                         timeout=default_pg_timeout)
    return td.PrefixStore(f"lmgym/restart{restart}/", shared)


def init_from_env(quiet: bool = True) -> torch.device:
    """Join the process group when launched by torchrun (gloo on CPU, NCCL on GPU; once, idempotent) and
    return this rank's device (cuda:LOCAL_RANK, set as the current device). With `quiet`, the standard
    output of ranks other than 0 is discarded so summaries print once (errors still reach stderr). The
    group is destroyed at exit."""
    if launched() and not is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        backend, store = "nccl" if torch.cuda.is_available() else "gloo", restart_store()
        if store is None:
            td.init_process_group(backend)
        else:
            td.init_process_group(backend, store=store, rank=int(os.environ["RANK"]),
                                  world_size=int(os.environ["WORLD_SIZE"]))
        atexit.register(destroy)
        if quiet and not is_main():
            sys.stdout = open(os.devnull, "w")
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def all_reduce_sum(value: float) -> float:
    if not is_initialized():
        return value
    t = torch.tensor([value], dtype=torch.float64,
                     device="cuda" if td.get_backend(group()) == "nccl" else "cpu")
    td.all_reduce(t, group=group())
    return float(t.item())


def sync_gradients(parameters) -> None:
    """Average gradients over ranks (flattened into one buffer per dtype)."""
    if not is_initialized() or world_size() == 1:
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    td.all_reduce(flat, group=group())
    flat /= world_size()
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset:offset + n].view_as(g))
        offset += n


def broadcast_parameters(parameters) -> None:
    """Make every rank start from rank 0's weights."""
    if not is_initialized():
        return
    for p in parameters:
        td.broadcast(p.data, src=_src(), group=group())


def destroy() -> None:
    """Leave the process group (no-op when there is none), once unreachable models that use it are freed
    (FSDP's sharded modules outliving the group made gloo's teardown abort the process now and then)."""
    if is_initialized():
        gc.collect()
        use_group(None)
        td.destroy_process_group()


def barrier() -> None:
    if is_initialized():
        td.barrier(group=group())


@contextmanager
def main_first() -> Iterator[None]:
    """Rank 0 runs the block first (e.g. renames files), then the other ranks do."""
    if not is_main():
        barrier()
    yield
    if is_main():
        barrier()


def main_result(fn: Callable[[], T]) -> T:
    """`fn()` run by rank 0 alone, its (picklable) result returned on every rank. An exception there is
    raised on every rank (on the others as the same class with the same message, or a RuntimeError when
    the class does not pickle), so no rank waits for a collective that rank 0 will not reach."""
    if not is_initialized():
        return fn()
    result, failure = None, None
    if is_main():
        try:
            result = fn()
        except Exception as err:  # noqa: BLE001 - raised again below, on every rank
            failure = err
    sent = broadcast_object((result, None if failure is None else (_picklable_class(failure), str(failure))))
    if failure is not None:
        raise failure
    if sent[1] is not None:
        kind, message = sent[1]
        try:
            error = kind(message)
        except Exception:  # noqa: BLE001 - a class that takes other arguments
            error = RuntimeError(message)
        raise error
    return sent[0]


def _picklable_class(error: Exception) -> type:
    try:
        pickle.dumps(type(error))
        return type(error)
    except Exception:  # noqa: BLE001 - e.g. a class defined inside a function
        return RuntimeError


def broadcast_object(value: Any) -> Any:
    """Rank 0's `value` on every rank (picklable objects)."""
    if not is_initialized():
        return value
    box = [value]
    td.broadcast_object_list(box, src=_src(), group=group())
    return box[0]


def gather_lists(items: list) -> list:
    """The concatenation, in rank order, of every rank's `items` (on every rank)."""
    if not is_initialized():
        return list(items)
    parts: list[Any] = [None] * world_size()
    td.all_gather_object(parts, list(items), group=group())
    return [x for part in parts for x in part]


def all_reduce_dict(values: dict[str, float]) -> dict[str, float]:
    """Sum each value over ranks (every rank must pass the same keys)."""
    if not is_initialized() or not values:
        return dict(values)
    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64,
                     device="cuda" if td.get_backend(group()) == "nccl" else "cpu")
    td.all_reduce(t, group=group())
    return dict(zip(keys, t.tolist()))
