"""Progress bars for the phases of a run (evaluation, sampling, scoring, the update) through tqdm."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm.auto import tqdm


def phase_bar(desc: str, total: int | None = None, unit: str = "it", enabled: bool = True) -> tqdm:
    """A transient bar under the run's bar (removed when closed); a no-op bar when not `enabled`."""
    return tqdm(total=total, desc=desc, unit=unit, leave=False, position=1, disable=not enabled,
                dynamic_ncols=True)


@contextmanager
def counting_tokens(policy, on_tokens: Callable[[int], None] | None) -> Iterator[None]:
    """While inside, `on_tokens(n)` hears of every n tokens the policy samples (its plain decoding loop);
    nothing happens when `on_tokens` is None or the policy has no such hook."""
    if on_tokens is None or not hasattr(policy, "on_tokens"):
        yield
        return
    previous = policy.on_tokens
    policy.on_tokens = on_tokens
    try:
        yield
    finally:
        policy.on_tokens = previous


def token_postfix(bar: tqdm) -> Callable[[int], None] | None:
    """A token counter shown as `bar`'s postfix (redrawn at most every mininterval); None if disabled."""
    if bar.disable:
        return None
    seen = 0

    def count(n: int) -> None:
        nonlocal seen
        first = seen == 0
        seen += n
        bar.set_postfix(tokens=seen, refresh=first)  # shown at once, then redrawn at most every mininterval
        bar.update(0)

    return count
