"""The batched episode engine through its public seams: snapshots, per-turn stop strings, chat-turn
injection and several roles, on the tiny model."""
import copy

import pytest
import torch

from lmgym.envs import make
from lmgym.episodes import DEFAULT_ROLE, EpisodeEngine, SamplingSettings, rollout
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer


class TurnEnv:
    """A scripted multi-turn env: turn k's stop strings are `stops[k]`, its actor `roles[k]`; after turn k
    it writes `injected[k]` = (text, role or None). It ends after len(stops) turns; its state records what
    each turn's actor was and wrote."""

    is_multi_step = True

    def __init__(self, stops, roles=None, injected=None):
        self.stops, self.roles = stops, roles or [DEFAULT_ROLE] * len(stops)
        self.injected = injected or [("", None)] * len(stops)
        self.max_steps = len(stops)

    def reset(self, seed=None, options=None):
        self.turns = []
        return f"Talk {seed}", {"seed": seed}

    def get_state(self):
        return {"turns": copy.deepcopy(self.turns)}

    def set_state(self, state):
        self.turns = copy.deepcopy(state["turns"])

    @property
    def stop_strings(self):
        return self.stops[len(self.turns)]

    @property
    def current_role(self):
        return self.roles[len(self.turns)]

    def step(self, action):
        self.turns.append({"role": self.current_role, "action": action})
        text, role = self.injected[len(self.turns) - 1]
        done = len(self.turns) == len(self.stops)
        return "", float(len(action)), done, False, {"injected_text": text, "injected_role": role,
                                                      "turns": copy.deepcopy(self.turns)}


def test_a_snapshot_advanced_later_samples_what_the_rollout_sampled(tiny_policy):
    env = make("Arithmetic-v0", mode="stepwise", max_steps=3)
    settings = SamplingSettings(max_new_tokens=6, temperature=1.0)
    starts = [{"seed": 0}, {"seed": 1}, {"seed": 2}]
    reference = rollout(env, tiny_policy, starts, 2, settings, sample_key=11)
    engine = EpisodeEngine(env, tiny_policy, settings)
    branches = engine.start(starts, 2)
    engine.advance(branches, sample_key=11)
    before = [b.snapshot() for b in branches]
    later = [b.snapshot() for b in branches[::-2]]  # a subset, in another order: other batches
    while engine.live(later):
        engine.advance(later, sample_key=11)
    for branch, index in zip(later, range(len(branches) - 1, -1, -2)):
        traj = branch.to_trajectory()
        assert traj.completion_ids == reference[index].completion_ids
        assert traj.completion_mask == reference[index].completion_mask
        assert traj.step_rewards == reference[index].step_rewards
        assert torch.allclose(torch.tensor(traj.logprobs), torch.tensor(reference[index].logprobs), atol=1e-5)
    assert [b.ids for b in branches] == [b.ids for b in before]  # the originals did not move
    assert any(len(r.step_ends) > 1 for r in reference)  # the snapshots really took later steps


def test_rollout_is_the_engine_with_a_generator_too(tiny_policy):
    env = make("Arithmetic-v0", mode="stepwise", max_steps=2, sym_calc=True)
    settings = SamplingSettings(max_new_tokens=5, temperature=1.0)
    reference = rollout(env, tiny_policy, [{"seed": 4}], 3, settings, torch.Generator().manual_seed(2))
    engine = EpisodeEngine(env, tiny_policy, settings)
    branches, generator = engine.start([{"seed": 4}], 3), torch.Generator().manual_seed(2)
    while engine.advance(branches, generator):
        pass
    assert [b.to_trajectory() for b in branches] == reference
    assert all(t.roles == [] for t in reference)  # one role: no per-token roles


def test_stop_strings_that_change_per_turn_are_honoured_per_branch(tiny_policy):
    vowels, digits = list("aeiouAEIOU"), list("0123456789")
    env = TurnEnv(stops=[vowels, digits, None])
    engine = EpisodeEngine(env, tiny_policy, SamplingSettings(max_new_tokens=40, temperature=1.0))
    ahead = engine.start([{"seed": 0}], 4)
    engine.advance(ahead, sample_key=3)
    behind = engine.start([{"seed": 1}], 4, first_group_id=1)
    assert {tuple(b.stop) for b in ahead} == {tuple(digits)} and {tuple(b.stop) for b in behind} == {tuple(vowels)}
    engine.advance(ahead + behind, sample_key=3)  # one batch: turn 2 (digits) and turn 1 (vowels) rows
    cut = 0
    for branch in ahead + behind:
        for turn, stop in zip(branch.info["turns"], env.stops):
            action = turn["action"]
            first = min((action.index(s) + 1 for s in stop if s in action), default=None)
            assert first is None or first == len(action)  # cut right after its own turn's first stop string
            cut += first is not None
    assert cut >= 8
    assert any(set(digits) & set(t["action"]) for b in behind for t in b.info["turns"])  # others' stops pass
    assert all(b.stop is None for b in ahead)  # the last turn has none


def test_a_chat_turn_injection_holds_the_templates_tokens_and_is_masked(tiny_policy):
    tok = tiny_policy.tokenizer
    env = TurnEnv(stops=[["="], None], injected=[("42", "tool"), ("", None)])
    trajs = rollout(env, tiny_policy, [{"seed": 0}], 2, SamplingSettings(max_new_tokens=8, temperature=1.0),
                    sample_key=5)
    for traj in trajs:
        first_end = traj.step_ends[0] + 1
        action = traj.completion_ids[:first_end]
        turn = "<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n"
        closed = action[-1] == tok.eos_token_id  # an assistant turn that ended is not closed twice
        expected = tok(("" if closed else "<|im_end|>\n") + turn, add_special_tokens=False)["input_ids"]
        injected = traj.completion_ids[first_end:first_end + len(expected)]
        assert injected == expected == tiny_policy.encode_turn("42", "tool", after=action)
        assert traj.completion_mask[first_end:first_end + len(expected)] == [0] * len(expected)
        assert traj.logprobs[first_end:first_end + len(expected)] == [0.0] * len(expected)
        assert traj.completion_mask[:first_end] == [1] * first_end
        assert len(traj.completion_ids) == traj.step_ends[1] + 1  # the second action follows the turn
        assert "<|im_start|>tool\n42" in traj.text
        actions = traj.outcome.actions  # what the env wrote after each action, and as which role
        assert [(a.role, a.injected_text, a.injected_role) for a in actions] == [("policy", "42", "tool"),
                                                                                 ("policy", "", None)]
        assert traj.text.startswith(actions[0].text) and traj.text.endswith(actions[1].text)


def test_encode_turn_from_the_template_raw_without_one_and_a_clear_error_for_a_rejected_role(tiny_policy):
    tok = tiny_policy.tokenizer
    assert tok.decode(tiny_policy.encode_turn("hi", "user")) == (
        "<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    closed = tiny_policy.encode_turn("hi", "user", after=[5, tok.eos_token_id])
    assert tok.decode(closed) == "\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    raw = HFPolicy(tiny_policy.model, tok, device="cpu", use_chat_template=False)
    assert raw.encode_turn("hi", "tool") == raw.encode_text("hi")
    strict_tok = build_tiny_tokenizer()
    strict_tok.chat_template = (
        "{% for m in messages %}{% if m['role'] not in ['user', 'assistant'] %}"
        "{{ raise_exception('Conversation roles must be user or assistant') }}{% endif %}"
        "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    strict = HFPolicy(tiny_policy.model, strict_tok, device="cpu")
    rejected = r"^encode_turn: the chat template rejects a 'tool' turn.*user or assistant"
    with pytest.raises(ValueError, match=rejected) as err:
        strict.encode_turn("42", "tool")
    assert "\n" not in str(err.value)


def two_role_policies():
    tok = build_tiny_tokenizer()
    return {role: HFPolicy(build_tiny_model(tok, seed=seed), tok, device="cpu")
            for role, seed in (("proposer", 1), ("checker", 2))}


def test_two_roles_each_sample_with_their_own_policy(tiny_policy):
    policies = two_role_policies()
    env = TurnEnv(stops=[["\n"], ["\n"], ["\n"]], roles=["proposer", "checker", "proposer"],
                  injected=[("Check:", "user"), ("\n", None), ("", None)])
    trajs = rollout(env, policies, [{"seed": 0}, {"seed": 1}], 2,
                    SamplingSettings(max_new_tokens=6, temperature=1.0), sample_key=9)
    for traj in trajs:
        assert len(traj.roles) == len(traj.completion_ids)
        ids = torch.tensor([traj.prompt_ids + traj.completion_ids])
        with torch.no_grad():
            scores = {role: p.token_logprobs(ids, torch.ones_like(ids), len(traj.prompt_ids))[0][0]
                      for role, p in policies.items()}
        start, gap = 0, 0.0
        for end, turn in zip(traj.step_ends, traj.info["turns"]):
            acted = [i for i in range(start, end + 1) if traj.completion_mask[i]]
            assert {traj.roles[i] for i in acted} == {turn["role"]}  # the env saw the role it named
            assert tiny_policy.tokenizer.decode([traj.completion_ids[i] for i in acted],
                                                skip_special_tokens=True) == turn["action"]
            recorded = torch.tensor([traj.logprobs[i] for i in acted])
            other = next(role for role in policies if role != turn["role"])
            assert torch.allclose(scores[turn["role"]][acted], recorded, atol=1e-5)  # sampled by its own policy
            gap = max(gap, float((scores[other][acted] - recorded).abs().max()))
            start = end + 1
        assert gap > 1e-3  # the other policy would have given these tokens other log-probs
        assert [t["role"] for t in traj.info["turns"]] == ["proposer", "checker", "proposer"]
        assert {traj.roles[i] for i, m in enumerate(traj.completion_mask) if not m} <= {"user", "env"}


def test_a_role_without_a_policy_is_a_clear_error():
    env = TurnEnv(stops=[None], roles=["judge"])
    with pytest.raises(ValueError, match="role 'judge' has no policy .*'proposer', 'checker'"):
        EpisodeEngine(env, two_role_policies()).start([{"seed": 0}])


def test_per_token_roles_round_trip_a_saved_record_and_bad_ones_are_named():
    from lmgym.buffers import Trajectory

    traj = Trajectory([1], [5, 6, 7], [-1.0, 0.0, -2.0], [1, 0, 1], 1.0, roles=["proposer", "env", "checker"])
    assert Trajectory.from_dict(traj.to_dict()) == traj
    old = {k: v for k, v in traj.to_dict().items() if k != "roles"}  # written before roles existed
    assert Trajectory.from_dict(old).roles == []
    with pytest.raises(ValueError, match=r"^roles must be empty or one per completion token \(3\), got 2$"):
        Trajectory.from_dict({**traj.to_dict(), "roles": ["proposer", "checker"]})
    with pytest.raises(ValueError, match=r"^roles\[1\] must be a role name"):
        Trajectory.from_dict({**traj.to_dict(), "roles": ["proposer", 3, "checker"]})


def test_two_roles_as_two_adapters_of_one_model():
    from lmgym.policies import AdapterRole, LoraSettings, add_adapter

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu", lora=LoraSettings(r=4, alpha=8))
    add_adapter(policy, "checker", LoraSettings(r=4, alpha=8))
    with torch.no_grad():  # peft starts every adapter as the base model (B = 0): make the two differ
        for name, weight in policy.model.named_parameters():
            if "lora_B" in name:
                weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(name) + ("checker" in name)))
    trainable = {n for n, p in policy.model.named_parameters() if p.requires_grad}
    roles = {"proposer": AdapterRole(policy, "default"), "checker": AdapterRole(policy, "checker")}
    env = TurnEnv(stops=[["\n"], ["\n"]], roles=["proposer", "checker"])
    traj = rollout(env, roles, [{"seed": 0}], 1, SamplingSettings(max_new_tokens=6, temperature=1.0), sample_key=3)[0]
    ids = torch.tensor([traj.prompt_ids + traj.completion_ids])
    with torch.no_grad():
        scores = {r: p.token_logprobs(ids, torch.ones_like(ids), len(traj.prompt_ids))[0][0] for r, p in roles.items()}
    for role in roles:
        acted = [i for i, r in enumerate(traj.roles) if r == role]
        assert acted and torch.allclose(scores[role][acted], torch.tensor([traj.logprobs[i] for i in acted]), atol=1e-5)
    assert not torch.allclose(scores["proposer"], scores["checker"])  # the adapters really differ
    assert policy.model.active_adapter == "default"                  # switched back after each role acted
    assert {n for n, p in policy.model.named_parameters() if p.requires_grad} == trainable
    with pytest.raises(ValueError, match="no adapter 'judge' \\(it has: default, checker\\)"):
        AdapterRole(policy, "judge")


def test_a_snapshot_shares_no_mutable_field_with_its_branch(tiny_policy):
    import dataclasses

    engine = EpisodeEngine(make("Arithmetic-v0", mode="stepwise", level=2), tiny_policy, SamplingSettings(8))
    (branch,) = engine.start([{"seed": 1}])
    engine.advance([branch], torch.Generator().manual_seed(0))
    twin = branch.snapshot()
    for f in dataclasses.fields(branch):
        value = getattr(branch, f.name)
        if isinstance(value, (list, dict)):
            assert getattr(twin, f.name) is not value, f.name
            assert getattr(twin, f.name) == value, f.name
    twin.state["env"]["extra"] = 1
    twin.info["extra"] = 1
    assert "extra" not in branch.state["env"] and "extra" not in branch.info


def test_a_step_changes_no_other_branchs_state_when_states_go_in_uncopied(tiny_policy):
    """A branch that owns its state hands the env its objects (no copy); the group's shared reset state, a
    snapshot's copy and the other branches' states are never changed by its steps."""
    env = make("Arithmetic-v0", mode="stepwise", level=2, max_steps=4)
    engine = EpisodeEngine(env, tiny_policy, SamplingSettings(6, temperature=1.0))
    branches = engine.start([{"seed": 1}], 3)
    shared = branches[0].state
    assert all(b.state is shared and not b.owns_state for b in branches)
    engine.advance(branches[:1], sample_key=1)  # the first steps alone: the others still hold the reset state
    assert branches[0].owns_state and branches[0].state is not shared
    assert shared["env"]["_steps"] == [] and branches[1].state is shared
    twin = branches[0].snapshot()
    kept = list(twin.state["env"]["_steps"])
    engine.advance(branches, sample_key=1)
    assert twin.state["env"]["_steps"] == kept and shared["env"]["_steps"] == []
    steps = [b.state["env"]["_steps"] for b in branches]
    assert [len(s) for s in steps] == [2, 1, 1] and len({id(s) for s in steps}) == 3
    engine.advance([twin], sample_key=1)  # the snapshot plays on by itself, as the branch did
    assert twin.actions[1].text == branches[0].actions[1].text
