"""The process reward model on the tiny model: step positions, scoring engine branches and text steps
alike, the solution aggregations, and its folder (save, load, bad folders)."""
import json

import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from lmgym.envs import make
from lmgym.episodes import EpisodeEngine, SamplingSettings
from lmgym.policies import (
    Generation,
    HFPolicy,
    ModelLoadError,
    ModelNotFoundError,
    Policy,
    ProcessRewardModel,
    aggregate_step_scores,
)
from lmgym.search.search_types import StepScorer

STEPS = ["14 * 18 = 252\n", "252 - 5 = 247\n", "#### 247\n"]


def prm_of(policy, seed: int = 1) -> ProcessRewardModel:
    """A PRM from `policy` with a random (non-zero) head, so scores differ between steps."""
    prm = ProcessRewardModel.from_policy(policy)
    torch.manual_seed(seed)
    torch.nn.init.normal_(prm.head.linear.weight, std=0.5)
    return prm


class ScriptedPolicy(Policy):
    """Plays fixed step texts in order, one per action (step k after k actions), with the real tokenizer."""

    def __init__(self, policy: HFPolicy, question: str, steps: list[str]):
        self.policy, self.tokenizer, self.steps = policy, policy.tokenizer, steps
        self.use_chat_template = policy.use_chat_template
        self.start = len(policy.format_prompt(question))

    def format_prompt(self, observation):
        return self.policy.format_prompt(observation)

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        out = []
        for prompt in prompts:
            text = self.steps[self.tokenizer.decode(prompt[self.start:]).count("\n")]
            ids = self.encode_text(text)
            out.append([Generation(list(prompt), ids, [0.0] * len(ids), text, "stop")] * n)
        return out

    def token_logprobs(self, *args, **kwargs):
        raise NotImplementedError("scripted: sampling only")


def test_aggregations_by_hand():
    scores = [0.9, 0.5, 0.8]
    assert aggregate_step_scores(scores, "min") == 0.5
    assert aggregate_step_scores(scores, "last") == 0.8
    assert aggregate_step_scores(scores, "product") == pytest.approx(0.36)
    assert aggregate_step_scores(scores, "mean") == pytest.approx(2.2 / 3)
    assert aggregate_step_scores([], "mean") == 0.0
    with pytest.raises(ValueError, match="aggregation must be one of min, last, product, mean; got 'max'"):
        aggregate_step_scores(scores, "max")


def test_step_logits_read_each_steps_last_token_of_a_right_padded_batch(tiny_policy):
    prm = prm_of(tiny_policy)
    rows = [prm.encode_text("12 + 30 = 42\n#### 42\n"), prm.encode_text("7 * 6\n")]
    positions = [[12, 20], [5]]
    ids, mask, pos = prm.step_batch(rows, positions)
    assert pos.tolist() == [[12, 20], [5, -1]] and mask[1].sum() == len(rows[1])
    logits = prm.step_logits(ids, mask, pos)
    assert logits.shape == (2, 2) and logits.requires_grad and logits.dtype == torch.float32
    with torch.no_grad():  # by hand: each row alone, the head on the hidden state at the chosen token
        for row, wanted, got in zip(rows, positions, logits):
            hidden = prm.backbone(input_ids=torch.tensor([row])).last_hidden_state[0]
            expected = hidden @ prm.head.linear.weight[0] + prm.head.linear.bias[0]
            assert got[:len(wanted)].tolist() == pytest.approx(expected[wanted].tolist(), abs=1e-5)
            assert abs(float(expected[wanted[0]] - expected[wanted[0] - 1])) > 1e-3  # the position matters
    assert logits[1, 1] == 0.0  # padding
    with pytest.raises(ValueError, match="sequence 1: step position 6 is outside its 6 tokens"):
        prm.step_batch(rows, [[12], [6]])


def test_from_policy_copies_the_backbone_and_prompts_like_the_policy(tiny_policy):
    prm = ProcessRewardModel.from_policy(tiny_policy)
    assert isinstance(prm, StepScorer)
    assert prm.format_prompt("What is 2 + 2?") == tiny_policy.format_prompt("What is 2 + 2?")
    assert prm.score_steps("What is 2 + 2?", ["2 + 2 = 4\n", "#### 4\n"]) == [0.5, 0.5]  # zero head
    before = tiny_policy.model.model.embed_tokens.weight.clone()
    with torch.no_grad():
        prm.backbone.embed_tokens.weight.add_(1.0)
    assert torch.equal(tiny_policy.model.model.embed_tokens.weight, before)  # a copy, not shared
    assert all(p.requires_grad for p in prm.parameters())
    with pytest.raises(ValueError, match="step 1 is empty"):
        prm.encode_steps("q", ["a\n", ""])


def test_score_branches_equals_score_steps_on_the_same_text(tiny_policy):
    prm = prm_of(tiny_policy)
    env = make("Arithmetic-v0", level=3, split="test", mode="stepwise")
    question, _ = env.reset(seed=0)
    engine = EpisodeEngine(env, ScriptedPolicy(tiny_policy, question, STEPS), SamplingSettings(max_new_tokens=20))
    branches = engine.start([{"seed": 0}], 2)
    engine.advance(branches)
    engine.advance(branches[:1])
    assert [b.steps for b in branches] == [2, 1]
    by_branch = prm.score_branches(branches)
    assert by_branch[0] == pytest.approx(prm.score_steps(question, STEPS[:2]), abs=1e-6)
    assert by_branch[1] == pytest.approx(prm.score_steps(question, STEPS[:1]), abs=1e-6)
    assert by_branch[0][0] == pytest.approx(by_branch[1][0], abs=1e-6)  # causal: a later step changes nothing before
    assert len(set(by_branch[0])) == 2 and all(0 < s < 1 for s in by_branch[0])
    for mine, theirs in zip(prm.score_trajectories([b.to_trajectory() for b in branches]), by_branch):
        assert mine == pytest.approx(theirs, abs=1e-6)
    many = prm.score_sequences(*zip(*[prm.encode_steps(question, STEPS[:k]) for k in (1, 3, 2)]), batch_size=2)
    assert [len(r) for r in many] == [1, 3, 2] and many[1][:2] == pytest.approx(by_branch[0], abs=1e-5)
    assert prm.solution_score(many[1]) == min(many[1])


def test_save_and_load_give_the_same_scores(tiny_policy, tmp_path):
    prm = prm_of(tiny_policy)
    prm.aggregation = "product"
    prm.save(tmp_path / "prm")
    loaded = ProcessRewardModel.from_pretrained(tmp_path / "prm", device="cpu")
    question = "What is 14 * 18 - 5?"
    assert loaded.score_steps(question, STEPS) == pytest.approx(prm.score_steps(question, STEPS), abs=1e-6)
    assert loaded.aggregation == "product" and loaded.use_chat_template and loaded.format_prompt(question) == \
        prm.format_prompt(question)
    settings = json.loads((tmp_path / "prm" / "prm_config.json").read_text())
    assert settings == {"aggregation": "product", "system_prompt": None, "use_chat_template": True}
    backbone = AutoModel.from_pretrained(str(tmp_path / "prm"))
    assert torch.equal(backbone.embed_tokens.weight, prm.backbone.embed_tokens.weight)
    causal = AutoModelForCausalLM.from_pretrained(str(tmp_path / "prm"))
    assert torch.equal(causal.model.norm.weight, prm.backbone.norm.weight)
    with pytest.raises(ValueError, match="a PRM does not generate"):
        prm.save(tmp_path / "other", generation={"temperature": 0.8})


def test_a_missing_or_bad_prm_folder_is_one_line(tiny_policy, tmp_path):
    with pytest.raises(ModelNotFoundError, match=f"no PRM folder at {tmp_path / 'absent'}"):
        ProcessRewardModel.from_pretrained(tmp_path / "absent")
    tiny_policy.save(tmp_path / "policy")
    with pytest.raises(ModelLoadError) as info:
        ProcessRewardModel.from_pretrained(tmp_path / "policy")
    assert str(info.value) == (f"{tmp_path / 'policy'} is not a PRM folder (no prm_config.json); "
                               f"ProcessRewardModel.save writes one")
    folder = tmp_path / "prm"
    ProcessRewardModel.from_policy(tiny_policy).save(folder)
    (folder / "prm_config.json").write_text('{"aggregation": "max", "system_prompt": null, "use_chat_template": true}')
    with pytest.raises(ModelLoadError, match=r"prm_config.json: bad or missing 'aggregation' \('max'\)"):
        ProcessRewardModel.from_pretrained(folder)
    (folder / "prm_config.json").write_text("{")
    with pytest.raises(ModelLoadError, match="prm_config.json:1: not valid JSON"):
        ProcessRewardModel.from_pretrained(folder)
    ProcessRewardModel.from_policy(tiny_policy).save(folder)
    (folder / "prm_head.safetensors").write_bytes(b"\x00" * 5)
    with pytest.raises(ModelLoadError) as info:
        ProcessRewardModel.from_pretrained(folder)
    assert "prm_head.safetensors" in str(info.value) and "\n" not in str(info.value)
