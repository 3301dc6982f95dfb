"""An HTTP server over a policy and an optional PRM: OpenAI-compatible /v1 routes (continuously batched, streamed
token by token), /generate, /solve (search) and /health.

`create_app` needs the [serve] extra (fastapi); it is imported on first use, so `import serving` and
`ServerLimits` work on a core install and a missing extra is one line at the point of use."""
from typing import TYPE_CHECKING, Any

from lmgym.serving.batcher import BatchSettings
from lmgym.serving.limits import ServerLimits

if TYPE_CHECKING:  # for type checkers and the API reference; at run time `__getattr__` imports it
    from lmgym.serving.app import create_app

__all__ = ["create_app", "BatchSettings", "ServerLimits"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from lmgym.serving.app import create_app

        return create_app
    raise AttributeError(f"module 'serving' has no attribute {name!r}")
