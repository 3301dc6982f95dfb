"""Whether wandb's "online" mode can log in, found when the config is built (before any model loads).

`wandb.init` in online mode without credentials stops with a traceback (or waits at a prompt) only once
the run starts; `online_login_problem` asks wandb's own credential lookup first: an earlier `wandb.login`
in this process, WANDB_API_KEY (or WANDB_IDENTITY_TOKEN_FILE), the .netrc file (~/.netrc, or NETRC), then
wandb's settings files, for wandb's server (WANDB_BASE_URL). All of it is read locally: no network, no
prompt, and nothing is stored.
"""
from __future__ import annotations

from lmgym.core.messages import first_line

LOGIN_FIXES = "run `wandb login`, set WANDB_API_KEY, or use --wandb offline (and `wandb sync` later)"


def online_login_problem() -> str | None:
    """None when wandb would find credentials for its server without asking; otherwise the problem, one line.
    A wandb without this lookup (wbauth, wandb >= 0.22) gives None: wandb.init decides then."""
    try:
        from wandb.errors import Error as WandbError
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib.wbauth import authenticate
    except ImportError:
        return None
    try:
        host = wandb_setup.singleton().settings.base_url
        found = authenticate.authenticate_session(host=host, source="rlgym", prompt=False, update_session=False)
    except WandbError as err:  # e.g. a malformed WANDB_API_KEY
        return f"wandb cannot use its credentials ({first_line(err)[:200]})"
    return None if found is not None else f"wandb finds no API key for {host}"
