"""The written policy contract (policies/base.py): HFPolicy satisfies every protocol; a minimal policy written
here, not derived from HFPolicy, trains with GRPO; trainers refuse a policy that lacks a member, in one line."""
import ast
import copy
import inspect
from pathlib import Path

import pytest
import torch
from typing_extensions import get_protocol_members

from lmgym.algorithms import GRPO, PPO, GRPOConfig, PPOConfig
from lmgym.envs import make
from lmgym.policies import (
    AdapterRole,
    BackbonePolicy,
    DataParallelPolicy,
    HFPolicy,
    LoraSettings,
    Policy,
    ProcessRewardModel,
    TrainableModel,
    TrainablePolicy,
    add_adapter,
    build_tiny_model,
    build_tiny_tokenizer,
)
from lmgym.policies.contract import check_contract, incompatible_members, missing_members
from lmgym.policies.decoding.generation import Generation, RowKeys, sample_tokens, stop_lists
from lmgym.training.progress import counting_tokens
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = (Policy, TrainableModel, TrainablePolicy, DataParallelPolicy, BackbonePolicy)


class MinimalPolicy:
    """Only TrainablePolicy's members, around a plain torch causal LM: no inheritance, no KV cache, one row at a
    time, the full-vocabulary logits in memory. What a non-HF policy would write."""

    use_chat_template = False
    system_prompt = None
    name_or_path = "minimal-tiny"
    is_lora = False
    bf16 = False

    def __init__(self, model: torch.nn.Module, tokenizer):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.device = torch.device("cpu")
        self.on_tokens = None

    def format_prompt(self, observation):
        return self.encode_text(observation)

    def encode_text(self, text):
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def encode_turn(self, text, role, after=()):
        return self.encode_text(text)

    @torch.no_grad()
    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        if isinstance(generator, RowKeys) and n > 1:
            generator = generator.repeat(n)
        stops, out = stop_lists(stop, len(prompts)), []
        for i, prompt in enumerate(prompts):
            row = []
            for j in range(n):
                ids, logprobs, reason = [], [], "length"
                for step in range(max_new_tokens):
                    logits = self.model(torch.tensor([prompt + ids])).logits[:, -1]
                    token, logprob = sample_tokens(logits, temperature, top_p, generator,
                                                   torch.tensor([i * n + j]), step)
                    ids.append(int(token))
                    logprobs.append(float(logprob))
                    if self.on_tokens is not None:
                        self.on_tokens(1)
                    if ids[-1] == self.tokenizer.eos_token_id:
                        reason = "eos"
                        break
                    if any(s in self.tokenizer.decode(ids) for s in stops[i]):
                        reason = "stop"
                        break
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                row.append(Generation(list(prompt), ids, logprobs, text, reason))
            out.append(row)
        return out

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0):
        positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions).logits.float()
        if temperature > 0:
            logits = logits / temperature
        logp = logits.log_softmax(-1)
        if isinstance(completion_start, int):
            completion_start = torch.arange(completion_start, input_ids.shape[1]).expand(input_ids.shape[0], -1)
        before = logp.gather(1, (completion_start - 1).clamp(min=0)[..., None].expand(-1, -1, logp.shape[-1]))
        token_logp = before.gather(-1, input_ids.gather(1, completion_start)[..., None]).squeeze(-1)
        return token_logp, -(before.exp() * before).sum(-1)

    def parameters(self):
        return [p for p in self.model.parameters() if p.requires_grad]

    def state_dict(self):
        return self.model.state_dict()

    def load_state_dict(self, state_dict):
        self.model.load_state_dict(state_dict)

    def frozen_copy(self):
        return MinimalPolicy(copy.deepcopy(self.model).requires_grad_(False), self.tokenizer)

    def save(self, directory, generation=None, merged=False):
        self.model.save_pretrained(str(directory))
        self.tokenizer.save_pretrained(str(directory))


def minimal_policy(cls: type = MinimalPolicy):
    tok = build_tiny_tokenizer()
    return cls(build_tiny_model(tok, seed=0), tok)


def without(cls: type, *names: str) -> type:
    """`cls` with the members `names` left out."""
    kept = {k: v for k, v in vars(cls).items() if k not in (*names, "__dict__", "__weakref__")}
    return type(f"{cls.__name__}Without", (), kept)


def assignment_targets(statement: ast.stmt) -> list[ast.expr]:
    """What an assignment statement assigns to."""
    return statement.targets if isinstance(statement, ast.Assign) else [statement.target]


def small_config(cls, tmp_path, **overrides):
    values = dict(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=6,
                  eval_episodes=2, output_dir=str(tmp_path / "run"), progress=False, micro_batch_size=4,
                  learning_rate=1e-2, eval_at_start=False, kl_coeff=0.1)
    values.update(overrides)
    return cls(**values)


# ---------------------------------------------------------------------------------------------- HFPolicy
@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_hf_policy_has_every_member_of_every_protocol_with_a_compatible_signature(tiny_policy, protocol):
    assert isinstance(tiny_policy, protocol)
    assert missing_members(tiny_policy, protocol) == []
    assert incompatible_members(tiny_policy, protocol) == []
    for name in get_protocol_members(protocol):  # the same, read here from the signatures themselves
        declared = inspect.getattr_static(protocol, name, None)
        if inspect.isfunction(declared):
            wanted = list(inspect.signature(declared).parameters.values())[1:]
            have = inspect.signature(getattr(tiny_policy, name)).parameters
            assert [p.name for p in wanted] == list(have)[:len(wanted)], name
            assert all(have[p.name].default == p.default for p in wanted), name
            assert all(p.default is not p.empty for p in list(have.values())[len(wanted):]), name


def test_the_prm_is_a_trainable_model_and_an_adapter_role_a_policy(tiny_policy):
    assert check_contract(ProcessRewardModel.from_policy(tiny_policy), TrainableModel, "PRMTrainer")
    tok = build_tiny_tokenizer()
    lora = HFPolicy(build_tiny_model(tok), tok, device="cpu", lora=LoraSettings(r=2, alpha=4))
    add_adapter(lora, "checker")
    role = AdapterRole(lora, "checker")
    assert check_contract(role, Policy, "EpisodeEngine") is role
    with counting_tokens(role, lambda n: None):
        assert lora.on_tokens is not None  # the role forwards the hook to the policy that samples for it


def test_every_hf_policy_attribute_is_set_in_init(tiny_policy):
    made = set(vars(tiny_policy))
    tree = ast.parse(inspect.getsource(HFPolicy))
    statements = [s for s in ast.walk(tree) if isinstance(s, (ast.Assign, ast.AnnAssign))]
    instances = {"self"} | {t.id for s in statements if ast.unparse(s.value or ast.Constant(None)) == "copy.copy(self)"
                            for t in assignment_targets(s) if isinstance(t, ast.Name)}
    assigned = {node.attr for s in statements for target in assignment_targets(s)
                for node in ast.walk(target)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in instances}
    assert "twin" in instances and {"model", "_sampling_weights"} <= assigned  # it reads what it should
    assert assigned <= made, assigned - made  # no method creates an attribute __init__ did not
    prompt = tiny_policy.format_prompt("hi")
    tiny_policy.use_data_parallel(None)
    tiny_policy.use_sampling_weights(None)
    with counting_tokens(tiny_policy, lambda n: None), tiny_policy.plain_decoding():
        tiny_policy.sample([prompt], 2, 4)
    copies = [tiny_policy.frozen_copy(), tiny_policy.unsharded_copy(tiny_policy.model.state_dict())]
    assert all(set(vars(p)) == made for p in [tiny_policy, *copies])
    assert copies[1].device == torch.device("cpu") and copies[1].model is not tiny_policy.model


def test_no_module_sets_a_private_attribute_of_a_policy_from_outside(tiny_policy):
    private = {name for name in vars(tiny_policy) if name.startswith("_")}
    assert private  # the check below has something to look for
    found = []
    for package in ("policies", "algorithms", "training", "search", "episodes", "serving", "traindata"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "policies" / "hf.py":
                continue
            for statement in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    found += [f"{path.relative_to(ROOT)}:{statement.lineno}" for target in assignment_targets(statement)
                              for node in ast.walk(target) if isinstance(node, ast.Attribute) and node.attr in private]
    assert found == []


# ---------------------------------------------------------------------------------------------- a second policy
@slow
def test_a_minimal_policy_written_from_the_protocol_trains_with_grpo(tmp_path):
    policy = minimal_policy()
    assert isinstance(policy, TrainablePolicy) and not isinstance(policy, HFPolicy)
    assert incompatible_members(policy, TrainablePolicy) == []
    before = [p.detach().clone() for p in policy.parameters()]
    algo = GRPO(policy, make("ToyDigits-v0"), small_config(GRPOConfig, tmp_path), eval_env=make("ToyDigits-v0"))
    assert isinstance(algo.ref_policy, MinimalPolicy)  # the KL reference came from its frozen_copy
    rows = algo.train()
    assert [r["iteration"] for r in rows] == [1, 2]
    for key in ("reward_mean", "loss_policy", "loss_kl", "kl", "entropy", "grad_norm", "eval_accuracy"):
        assert key in rows[-1], key
    assert all(r["tokens_per_second"] > 0 for r in rows)
    changed = sum(not torch.equal(a, b) for a, b in zip(before, policy.parameters()))
    assert changed > 0
    assert rows[-1]["kl"] > 0  # the policy moved away from its frozen reference
    assert (tmp_path / "run" / "metrics.jsonl").read_text().count("\n") == 2
    assert (tmp_path / "run" / "checkpoint-2" / "model.safetensors").is_file()


def test_ppo_refuses_the_minimal_policy_naming_the_backbone_members_it_needs(tmp_path):
    with pytest.raises(TypeError) as err:
        PPO(minimal_policy(), make("ToyDigits-v0"), small_config(PPOConfig, tmp_path))
    assert str(err.value) == ("PPO: MinimalPolicy is not a BackbonePolicy (lmgym.policies.base): it lacks autocast, "
                              "backbone_and_head, compile_layers, completion_hidden, completion_outputs, "
                              "logprob_chunk, training_backbone")


# ---------------------------------------------------------------------------------------------- refusals
def test_a_trainer_refuses_a_policy_missing_members_in_one_line(tmp_path):
    policy = minimal_policy(without(MinimalPolicy, "frozen_copy", "save"))
    with pytest.raises(TypeError) as err:
        GRPO(policy, make("ToyDigits-v0"), small_config(GRPOConfig, tmp_path))
    assert str(err.value) == ("GRPO: MinimalPolicyWithout is not a TrainablePolicy (lmgym.policies.base): "
                              "it lacks frozen_copy, save")


def test_a_given_reference_policy_is_checked_too(tmp_path, tiny_policy):
    reference = minimal_policy(without(MinimalPolicy, "token_logprobs"))
    with pytest.raises(TypeError) as err:
        GRPO(tiny_policy, make("ToyDigits-v0"), small_config(GRPOConfig, tmp_path, kl_coeff=0.1), ref_policy=reference)
    assert str(err.value) == ("GRPO's ref_policy: MinimalPolicyWithout is not a TrainablePolicy (lmgym.policies.base): "
                              "it lacks token_logprobs")
    from lmgym.algorithms import DPO, DPOConfig
    from lmgym.traindata import PreferencePair

    with pytest.raises(TypeError, match="^DPO's ref_policy: MinimalPolicyWithout is not a TrainablePolicy"):
        DPO(tiny_policy, [PreferencePair("q", "a", "b")], DPOConfig(output_dir=str(tmp_path / "dpo"), progress=False),
            ref_policy=reference)


def test_a_trainer_refuses_a_method_it_cannot_call_as_declared(tmp_path):
    class NoGenerator(MinimalPolicy):
        def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None):
            return super().sample(prompts, n, max_new_tokens, temperature, top_p, stop)

    with pytest.raises(TypeError) as err:
        GRPO(minimal_policy(NoGenerator), make("ToyDigits-v0"), small_config(GRPOConfig, tmp_path))
    message = str(err.value)
    assert message.startswith("GRPO: NoGenerator is not a TrainablePolicy (lmgym.policies.base): sample() cannot be "
                              "called with every argument by position")
    assert "\n" not in message


def test_the_contract_check_accepts_keyword_catch_alls_and_rejects_extra_required_arguments():
    class Loose(MinimalPolicy):
        def sample(self, prompts, *args, **kwargs):
            return super().sample(prompts, *args, **kwargs)

        def save(self, directory, generation=None, merged=False, *, compress):
            raise AssertionError("never called")

    assert missing_members(minimal_policy(Loose), TrainablePolicy) == []
    assert incompatible_members(minimal_policy(Loose), TrainablePolicy) == [
        "save() cannot be called with the required arguments only (missing a required argument: 'compress')"]
