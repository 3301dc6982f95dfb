"""Hugging Face Hub names and uploads: which hub id a model folder records, and `push_folder`.

The embedded default model (policies/loading/models.py) is SmolLM2-135M-Instruct from a GGUF file; saved folders
record its hub id, `EMBEDDED_HUB_ID`, so that peft and the Hub resolve it. The uploader is
`huggingface_hub.HfApi` (create_repo + upload_folder); `hub_api` takes any object with those two methods,
so tests push into a local folder standing in for the hub.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from lmgym.core.messages import first_line
from lmgym.policies.loading.models import EMBEDDED_ALIASES, EMBEDDED_HUB_ID


class HubApi(Protocol):
    """The two methods of `huggingface_hub.HfApi` that `push_folder` calls."""

    def create_repo(self, repo_id: str, **kwargs: Any) -> Any: ...

    def upload_folder(self, *, repo_id: str, folder_path: str, **kwargs: Any) -> Any: ...


def is_hub_id(name: str | None) -> bool:
    """True for a well-formed hub repo id (`user/name`, or a legacy `gpt2`) that is not a local path."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if not name or Path(name).expanduser().exists():
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def check_repo_id(repo_id: str) -> str:
    """`repo_id` if it is a valid hub repo id, else one-line ValueError naming the expected form."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise ValueError(f"push_to_hub: {repo_id!r} is not a hub repo id; write it as user/name "
                         f"(letters, digits, '-', '_', '.'; at most 96 characters)") from None
    return repo_id


def recorded_base(name_or_path: str | None) -> str | None:
    """The base an adapter folder records (adapter_config.json's `base_model_name_or_path`): the embedded
    model's hub id for the embedded alias; any other name or local path as given."""
    return EMBEDDED_HUB_ID if name_or_path in EMBEDDED_ALIASES else name_or_path


def push_folder(folder: str | Path, repo_id: str, *, hub_api: HubApi | None = None, private: bool | None = None,
                token: str | None = None, commit_message: str = "Upload model trained with lmgym") -> Any:
    """Create the model repo `repo_id` (kept if it exists) and upload `folder` into it; returns what
    `upload_folder` returns (a CommitInfo for HfApi). `hub_api` defaults to `HfApi(token=token)`."""
    folder = Path(folder)
    if not (folder / "config.json").is_file() and not (folder / "adapter_config.json").is_file():
        raise ValueError(f"push_to_hub: {folder} is not a saved model folder (no config.json or adapter_config.json)")
    check_repo_id(repo_id)
    if hub_api is None:
        from huggingface_hub import HfApi

        hub_api = HfApi(token=token)
    hub_api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    return hub_api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model",
                                 commit_message=commit_message)


class HubPreflightError(ValueError):
    """`push_to_hub` cannot happen (no token, offline, the hub unreachable or the token refused): one line."""


def _offline() -> bool:
    """Whether huggingface_hub is in offline mode (HF_HUB_OFFLINE, read now, not only at its import)."""
    import os

    from huggingface_hub import constants

    if "HF_HUB_OFFLINE" in os.environ:
        return os.environ["HF_HUB_OFFLINE"].strip().upper() in ("1", "ON", "YES", "TRUE")
    return bool(constants.HF_HUB_OFFLINE)


def hub_preflight(repo_id: str, *, dry_run: bool = False, hub_api: Any = None, token: str | None = None) -> str:
    """Before training, check that the model can be pushed to `repo_id` when it ends: the repo name, a token,
    huggingface_hub not offline, and the hub reachable with that token accepting it (`whoami`). `dry_run`
    checks the name alone (no token, no network): the folder is then written and not uploaded. A stand-in
    `hub_api` (tests) is not asked. Returns what was checked, in words; a HubPreflightError line otherwise."""
    check_repo_id(repo_id)
    if dry_run:
        return f"push_to_hub dry run: {repo_id} is a valid repo id; the model folder will not be uploaded"
    if hub_api is not None:
        return f"push_to_hub: {repo_id} through the given hub_api"
    from huggingface_hub import get_token

    dry = "or set hub_dry_run to train and write the model folder without uploading it"
    token = token or get_token()
    if not token:
        raise HubPreflightError(f"push_to_hub={repo_id}: no Hugging Face token (run `hf auth login`, or set "
                                f"HF_TOKEN), {dry}")
    if _offline():
        raise HubPreflightError(f"push_to_hub={repo_id}: HF_HUB_OFFLINE is set, so the hub cannot be reached to "
                                f"upload the model after training; unset it, {dry}")
    from huggingface_hub import HfApi

    try:
        HfApi(token=token).whoami()
    except Exception as err:  # HTTP errors, connection errors, timeouts: all one line here
        status = getattr(getattr(err, "response", None), "status_code", None)
        reason = ("the hub refused the token (HTTP 401): log in again or set a valid HF_TOKEN" if status == 401
                  else f"the hub cannot be reached ({type(err).__name__}: {first_line(err)[:200]})")
        raise HubPreflightError(f"push_to_hub={repo_id}: {reason}; {dry}") from None
    return f"push_to_hub: {repo_id}, token accepted by the hub"
