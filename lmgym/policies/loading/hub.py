"""Hugging Face Hub names and uploads: which hub id a model folder records, and `push_folder`.

The embedded default model (policies/loading/models.py) is SmolLM2-135M-Instruct from a GGUF file; saved folders
record its hub id, `EMBEDDED_HUB_ID`, so that peft and the Hub resolve it. The uploader is
`huggingface_hub.HfApi` (create_repo + upload_folder); `hub_api` takes any object with those two methods,
so tests push into a local folder standing in for the hub.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

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
