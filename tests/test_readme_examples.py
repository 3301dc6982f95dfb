"""The code the README shows works as shown."""
import torch

from algorithms import RLAlgorithm, RLConfig
from envs import LanguageEnv, Problem, make, register
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


class Capitals(LanguageEnv):
    CAPITALS = [("What is the capital of France?", "Paris"), ("What is the capital of Peru?", "Lima")]
    num_problems = len(CAPITALS)

    def get_problem(self, i):
        return Problem(*self.CAPITALS[i], problem_id=str(i))


class Reinforce(RLAlgorithm):
    config_class = RLConfig

    def advantages(self, batch):
        return (batch.rewards - batch.rewards.mean())[:, None] * batch.loss_mask

    def loss(self, batch, logprobs, entropy):
        return {"policy": -logprobs * batch.advantages}


def test_register_and_make_a_custom_env_in_three_lines():
    register("Capitals-v0", Capitals)
    env = make("Capitals-v0", instruction="", reward_fns={"exact": lambda text, gold, info: float(gold in text)})
    obs, info = env.reset(options={"index": 1})
    assert obs == "What is the capital of Peru?" and info["gold"] == "Lima"
    _, reward, terminated, _, _ = env.step("It is Lima.")
    assert reward == 1.0 and terminated
    env.reset(options={"index": 0})
    assert env.step("Lyon")[1] == 0.0


def test_readme_reinforce_subclass_trains(tiny_policy, tmp_path):
    config = RLConfig(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=6,
                      output_dir=str(tmp_path / "run"), progress=False, eval_at_start=False, learning_rate=1e-3)
    before = [p.detach().clone() for p in tiny_policy.parameters()]
    rows = Reinforce(tiny_policy, make("ToyDigits-v0"), config).train()
    assert len(rows) == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_policy.parameters()))
