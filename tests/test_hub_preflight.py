"""`push_to_hub` is checked before training (token, repo name, the hub reachable, or an explicit dry run) and
refused in one line; the model card names the repo it is pushed to, holds no local path and no placeholder, and
its metadata passes the checks `ModelCard.validate` stands for, done locally (offline: no network here)."""
import os
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard, ModelCardData
from huggingface_hub.repocard_data import model_index_to_eval_results
from huggingface_hub.utils import validate_repo_id

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.policies.loading.hub import HubPreflightError, hub_preflight
from lmgym.training.cli import run_with_clear_errors
from tests.test_model_card import LocalHub, hub_named_policy
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

ROOT = Path(__file__).resolve().parents[1]


class LoggedInHub(LocalHub):
    """The local stand-in, answering `whoami` as the hub does for a valid token."""

    def __init__(self, root: Path, *, reachable: bool = True):
        super().__init__(root)
        self.reachable = reachable

    def whoami(self):
        if not self.reachable:
            raise ConnectionError("Failed to resolve 'huggingface.co'\nmore detail")
        return {"name": "me", "type": "user"}


def tiny_grpo(tmp_path, **overrides) -> GRPO:
    config = GRPOConfig(train_iterations=1, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                        micro_batch_size=2, eval_episodes=2, eval_at_start=False, progress=False,
                        output_dir=str(tmp_path / "run"), **overrides)
    return GRPO(hub_named_policy(), make("ToyDigits-v0"), config, eval_env=make("ToyDigits-v0"))


@pytest.fixture
def no_login(monkeypatch, tmp_path):
    """No token anywhere (HF_TOKEN unset, an empty HF_HOME), huggingface_hub not offline."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.get_token", lambda: os.environ.get("HF_TOKEN"))  # no stored login


def test_offline_with_a_token_refuses_before_the_first_iteration_in_one_line(tmp_path, monkeypatch, no_login):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_fake_token_for_tests")
    algo = tiny_grpo(tmp_path, push_to_hub="me/tiny-grpo")
    with pytest.raises(SystemExit) as info:
        run_with_clear_errors(algo.train)
    message = str(info.value.code)
    assert message.startswith("error: push_to_hub=me/tiny-grpo: HF_HUB_OFFLINE is set") and "\n" not in message
    assert "hub_dry_run" in message
    assert algo.iteration == 0 and not (tmp_path / "run" / "metrics.jsonl").exists()


def test_no_token_unreachable_and_refused_tokens_each_get_one_line(tmp_path, monkeypatch, no_login):
    with pytest.raises(HubPreflightError, match="no Hugging Face token") as info:
        hub_preflight("me/tiny")
    assert "\n" not in str(info.value)
    monkeypatch.setenv("HF_TOKEN", "hf_fake_token_for_tests")
    hub = LoggedInHub(tmp_path / "hub", reachable=False)
    monkeypatch.setattr("huggingface_hub.HfApi", lambda token=None: hub)
    with pytest.raises(HubPreflightError, match="the hub cannot be reached") as info:
        hub_preflight("me/tiny")
    assert "\n" not in str(info.value) and "ConnectionError: Failed to resolve" in str(info.value)
    hub.reachable = True
    assert "token accepted" in hub_preflight("me/tiny")
    with pytest.raises(ValueError, match="not a hub repo id"):
        hub_preflight("not a repo//id", dry_run=True)


def test_a_dry_run_trains_and_writes_the_model_without_uploading(tmp_path, monkeypatch, capsys, no_login):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no token, offline: the dry run needs neither
    monkeypatch.setattr("huggingface_hub.HfApi", lambda token=None: pytest.fail("a dry run never uploads"))
    algo = tiny_grpo(tmp_path, push_to_hub="me/tiny-grpo", hub_dry_run=True)
    algo.train()
    folder = algo.save_model()
    assert "hub_dry_run: " in capsys.readouterr().out and (folder / "model.safetensors").is_file()
    assert 'model="me/tiny-grpo")' in (folder / "README.md").read_text()


def check_card_offline(text: str) -> dict:
    """What the hub's YAML validation checks, done locally: the card parses with strict metadata, its ids are
    hub ids, its model-index turns into eval results, and its metadata survives a round trip."""
    card = ModelCard(text, ignore_metadata_errors=False)
    data = card.data.to_dict()
    for repo in [data.get("base_model"), *(data.get("datasets") or [])]:
        if repo is not None:
            validate_repo_id(repo)
    if "model-index" in data:
        name, results = model_index_to_eval_results(data["model-index"])
        assert name and results
    assert ModelCardData(**data).to_dict() == data
    assert yaml.safe_load(text.split("---")[1]) == data
    return data


@slow
def test_the_pushed_card_names_the_repo_and_no_local_path(tmp_path, monkeypatch, no_login):
    monkeypatch.setenv("HF_TOKEN", "hf_fake_token_for_tests")
    hub = LoggedInHub(tmp_path / "hub")
    monkeypatch.setattr("huggingface_hub.HfApi", lambda token=None: hub)
    algo = tiny_grpo(tmp_path, push_to_hub="me/tiny-grpo")
    algo.train()
    algo.save_model()
    text = (tmp_path / "hub" / "me" / "tiny-grpo" / "README.md").read_text()
    assert 'pipeline("text-generation", model="me/tiny-grpo")' in text
    assert "path/or/repo" not in text and str(tmp_path) not in text and "/tmp" not in text
    assert "output_dir: run\n" in text  # the run folder's name, not its path
    data = check_card_offline(text)
    assert data["base_model"] == "someone/tiny-base"


def test_a_policy_pushed_by_itself_names_its_repo_too(tmp_path):
    hub = LocalHub(tmp_path / "hub")
    hub_named_policy().push_to_hub("me/tiny", hub_api=hub)
    text = (tmp_path / "hub" / "me" / "tiny" / "README.md").read_text()
    assert 'model="me/tiny")' in text and "path/or/repo" not in text and str(tmp_path) not in text
    check_card_offline(text)
    hub_named_policy().save(tmp_path / "local")  # not pushed: the folder by its name, no path of this machine
    local = (tmp_path / "local" / "README.md").read_text()
    assert 'model="local")' in local and str(tmp_path) not in local and "path/or/repo" not in local
    check_card_offline(local)


def test_config_reference_help_prints_help_and_writes_nothing(capsys):
    """The script's `main` as its command line runs it (in this process: a subprocess paid an import of the
    package per call, ~10 s each on two loaded cores)."""
    from tests.test_config_help import load

    page = ROOT / "docs" / "config-reference.md"
    before = page.read_bytes(), page.stat().st_mtime_ns
    script = load(ROOT / "scripts" / "config_reference.py")
    with pytest.raises(SystemExit) as done:
        script.main(["--help"])
    out, _ = capsys.readouterr()
    assert done.value.code == 0 and "usage:" in out and "--check" in out
    with pytest.raises(SystemExit) as done:
        script.main(["--chek"])
    _, err = capsys.readouterr()
    assert done.value.code == 2 and "unrecognized arguments: --chek" in err
    assert (page.read_bytes(), page.stat().st_mtime_ns) == before
