"""`Trainer` without RL: a supervised trainer in a few dozen lines reuses the loop, the run folder,
checkpoints and resume through public seams only."""
import json

import pytest
import torch
import torch.nn.functional as F

from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.training import Trainer, TrainerConfig
from tests import checkpoint_state
from tests.tiers import slow

TEXTS = ["2 + 3 = 5", "7 - 4 = 3", "6 * 2 = 12", "9 / 3 = 3", "1 + 1 = 2", "8 - 8 = 0"]
HELD_OUT = ["4 + 4 = 8", "5 * 1 = 5"]


class SupervisedTrainer(Trainer):
    """Next-token cross-entropy on fixed texts, every token weighing the same within an optimizer step."""

    def __init__(self, policy, texts: list[str], config: TrainerConfig, held_out: list[str] = ()):
        super().__init__(policy, config)
        self.texts, self.held_out = [policy.encode_text(t) for t in texts], [policy.encode_text(t) for t in held_out]

    def token_loss(self, rows: list[list[int]], normaliser: float) -> torch.Tensor:
        """Summed next-token cross-entropy of `rows` (padded), divided by `normaliser`."""
        width, pad = max(map(len, rows)), self.policy.tokenizer.pad_token_id
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=self.device)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=self.device)
        with self.policy.autocast():  # bf16 on CUDA when config.bf16
            logits = self.policy.model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        nll = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        return (nll * mask[:, 1:]).sum() / normaliser

    def train_iteration(self) -> dict:
        items = [self.texts[i] for i in self.local_rng.permutation(len(self.texts))]  # seeded per iteration
        tokens = float(sum(len(r) - 1 for r in items))
        self.policy.model.train()
        with self.timed("update"):
            stats = self.optimizer_step(items, lambda chunk: {"nll": self.token_loss(chunk, tokens)})
        self.record("tokens", tokens)
        return stats

    @torch.no_grad()
    def evaluate(self) -> dict:
        self.policy.model.eval()
        return {"loss": float(self.token_loss(self.held_out, sum(len(r) - 1 for r in self.held_out)))}


def trainer(run_dir, iterations: int) -> SupervisedTrainer:
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    config = TrainerConfig(train_iterations=iterations, micro_batch_size=4, learning_rate=3e-3, warmup_iterations=3,
                           eval_every=2, save_every=1, keep_checkpoints=2, progress=False, output_dir=str(run_dir))
    return SupervisedTrainer(policy, TEXTS, config, held_out=HELD_OUT)


@slow
@pytest.mark.plots  # reads the run's PNGs (tests/conftest.py)
def test_a_supervised_trainer_resumed_at_2_equals_an_uninterrupted_run_to_4(tmp_path, capsys):
    whole = trainer(tmp_path / "whole", 4)
    whole_rows = whole.train()
    assert trainer(tmp_path / "split", 2).train()[-1]["iteration"] == 2
    resumed = trainer(tmp_path / "split", 4)
    rows = resumed.train(resume=True)
    run = tmp_path / "split"
    assert f"resuming from {run / 'checkpoint-2'} (iteration 2)" in capsys.readouterr().out

    assert [r["iteration"] for r in rows] == [r["iteration"] for r in whole_rows] == [0, 1, 2, 3, 4]
    for mine, theirs in zip(rows, whole_rows):
        for key in ("loss", "nll", "grad_norm", "learning_rate", "tokens", "eval_loss"):
            if key in theirs:
                assert mine[key] == pytest.approx(theirs[key], abs=1e-6), (mine["iteration"], key)
    assert whole_rows[4]["loss"] < whole_rows[1]["loss"]  # it learns the texts
    assert "eval_loss" in rows[0] and "eval_loss" in rows[2] and "eval_loss" not in rows[3]
    for a, b in zip(resumed.policy.parameters(), whole.policy.parameters()):
        assert torch.allclose(a, b, atol=1e-6)

    assert json.loads((run / "config.json").read_text())["algorithm"] == "SupervisedTrainer"
    assert json.loads((run / "config.json").read_text())["train_iterations"] == 4
    assert (run / "metrics.png").stat().st_size > 1000
    assert checkpoint_state.entries(run) == ["checkpoint-3", "checkpoint-4"]
    manifest = json.loads((run / "checkpoint-4" / "MANIFEST.json").read_text())
    assert set(manifest["files"]) == {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth",
                                      "trainer_state.json", "config.json",
                                      "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                      "chat_template.jinja"}  # no RL buffer: only the Trainer's state
    assert not list(run.glob("*.bak"))  # continued, not started over


def test_the_optimizer_step_is_the_same_whatever_the_micro_batch_size(tmp_path):
    steps = {}
    for size in (1, 6):
        sft = trainer(tmp_path / str(size), 1)
        sft.config.micro_batch_size = size
        tokens = float(sum(len(r) - 1 for r in sft.texts))
        stats = sft.optimizer_step(sft.texts,
                                   lambda chunk, sft=sft, tokens=tokens: {"nll": sft.token_loss(chunk, tokens)})
        steps[size] = (stats, [p.grad.clone() for p in sft.policy.parameters()])  # grads stay after the step
    assert steps[1][0]["loss"] == pytest.approx(steps[6][0]["loss"], abs=1e-6)
    assert steps[1][0]["grad_norm"] == pytest.approx(steps[6][0]["grad_norm"], rel=1e-5)
    for a, b in zip(steps[1][1], steps[6][1]):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_trainer_without_train_iteration_cannot_be_built(tiny_policy, tmp_path):
    with pytest.raises(TypeError, match="train_iteration"):
        Trainer(tiny_policy, TrainerConfig(output_dir=str(tmp_path)))


def test_a_trainer_refuses_a_config_of_another_kind_in_one_line(tiny_policy):
    with pytest.raises(TypeError) as info:
        SupervisedTrainer(tiny_policy, TEXTS, {"learning_rate": 1e-3})
    assert str(info.value) == "SupervisedTrainer takes a TrainerConfig, got a dict"
