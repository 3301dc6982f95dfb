"""An HTTP server over a policy and an optional PRM: /generate, /solve (search) and /health."""
from serving.app import create_app
from serving.limits import ServerLimits

__all__ = ["create_app", "ServerLimits"]
