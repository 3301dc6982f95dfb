"""Continuous play (policies/decoding/continuous.py): episodes go on inside one fast-decoder call, and every
action is the one the round-by-round engine samples: the same tokens, log-probs, injected text and outcomes,
greedy and keyed-sampled, with LoRA too, for stepwise envs, per-turn stop strings and injected turns short
and long."""
import copy

import pytest

from lmgym.envs import make
from lmgym.episodes import DEFAULT_ROLE, EpisodeEngine, SamplingSettings
from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding.step import FORCED_TOKENS
from tests.tiers import slow


class TurnEnv:
    """A scripted multi-turn env: turn k stops at `stops[k]` and is followed by `injected[k]` (text, role)."""

    is_multi_step = True

    def __init__(self, stops, injected, header="", short_seeds=()):
        self.stops, self.injected, self.max_steps, self.header = stops, injected, len(stops), header
        self.short_seeds = short_seeds  # their episodes end after one turn

    def reset(self, seed=None, options=None):
        self.turns, self.seed = [], seed
        return f"{self.header}Talk {seed}", {}

    def get_state(self):
        return {"turns": copy.deepcopy(self.turns), "seed": self.seed}

    def set_state(self, state):
        self.turns, self.seed = copy.deepcopy(state["turns"]), state["seed"]

    @property
    def stop_strings(self):
        return self.stops[len(self.turns)]

    @property
    def current_role(self):
        return DEFAULT_ROLE

    def step(self, action):
        self.turns.append(action)
        text, role = self.injected[len(self.turns) - 1]
        done = len(self.turns) == len(self.stops) or self.seed in self.short_seeds
        return "", float(len(action)), done, False, {"injected_text": text, "injected_role": role}


def policies(lora=False, seed=3, overlap=False):
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=seed)
    settings = LoraSettings(r=4, alpha=8) if lora else None
    fast = HFPolicy(model, tok, device="cpu", fast_decode=True, lora=settings)
    if lora:  # a trained adapter: B is zero at initialisation
        for name, p in fast.model.named_parameters():
            if "lora_B" in name:
                p.data.normal_(0, 0.3)
    fast.fast_decoder.sync_every = 4
    fast.fast_decoder.overlap_host = overlap  # as on CUDA: the next steps run before the host settles a sync
    return fast


def played(env, policy, settings, continuous, starts, group, **noise):
    engine = EpisodeEngine(env, policy, settings)
    branches = engine.start(starts, group)
    if continuous:
        steps = []
        rounds = engine.play(branches, after_step=lambda b: steps.append(b.steps), **noise)
        return branches, rounds, steps
    rounds = 0
    while engine.live(branches):
        engine.advance(branches, **noise)
        rounds += 1
    return branches, rounds, None


def assert_same(a, b, tolerance=1e-4):
    for x, y in zip(a, b):
        assert x.ids == y.ids
        assert x.mask == y.mask and x.roles == y.roles and x.step_ends == y.step_ends
        assert x.text == y.text and x.done == y.done and x.truncated == y.truncated
        assert x.step_rewards == y.step_rewards
        assert max((abs(p - q) for p, q in zip(x.logprobs, y.logprobs)), default=0.0) < tolerance


@slow
@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("noise", ["greedy", "keyed"])
def test_stepwise_episodes_play_on_in_one_call_as_round_by_round(noise, overlap):
    policy = policies(overlap=overlap)
    env = make("Arithmetic-v0", mode="stepwise", max_steps=4, level=2)
    settings = SamplingSettings(max_new_tokens=12, temperature=0.0 if noise == "greedy" else 1.0)
    kwargs = {} if noise == "greedy" else {"sample_key": 11}
    starts = [{"options": {"index": i}} for i in range(3)]
    a, calls, steps = played(env, policy, settings, True, starts, 4, **kwargs)
    b, rounds, _ = played(env, policy, settings, False, starts, 4, **kwargs)
    assert_same(a, b)
    assert rounds >= 3 and calls < rounds  # whole episodes went on inside a call
    assert sum(len(x.step_ends) for x in a) == len(steps)  # after_step heard of every action
    if noise == "keyed":  # an action cut at its length limit is followed by a line break: a fed token
        assert any(x.actions[k].injected_text == "\n" for x in a for k in range(len(x.actions) - 1))


@slow
@pytest.mark.parametrize("lora,overlap", [(False, False), (True, True)])
def test_short_and_long_injected_turns_and_per_turn_stops(lora, overlap):
    """A short raw injection and a chat turn are fed one token a step; a turn longer than FORCED_TOKENS leaves the
    first call, and the second, with room for it (fed_turn_tokens), feeds it in one pass over its rows
    (extension.py). Each turn's own stop strings cut it."""
    policy = policies(lora=lora, seed=4, overlap=overlap)
    long_text = varied(FORCED_TOKENS + 5)
    env = TurnEnv(stops=[list("aeiou"), ["1", "2", "3"], list("xyz"), None, None],
                  injected=[("=", None), ("42", "tool"), (long_text, None), ("ok", None), ("", None)])
    settings = SamplingSettings(max_new_tokens=10, temperature=1.0, fed_turn_tokens=64)
    starts = [{"seed": s} for s in range(3)]
    a, calls, _ = played(env, policy, settings, True, starts, 3, sample_key=7)
    b, rounds, _ = played(env, policy, settings, False, starts, 3, sample_key=7)
    assert_same(a, b)
    assert rounds == 5 and calls == 2  # the first call has room for 16 tokens a turn; the second for 64
    assert policy.fast_decoder.stats["extended_tokens"] >= 3 * 3 * len(long_text)  # 3 starts x 3 episodes
    assert all(long_text in x.text for x in a)


def test_rows_that_share_a_long_prompt_play_on_from_one_copy_of_it():
    """A long shared prompt and 8 episodes a start: the call decodes grouped (shared_prefix.py), plays on, and
    moves the groups still playing into a smaller bucket once half of them ended."""
    policy = policies(seed=6, overlap=True)
    env = TurnEnv(stops=[["\n"], ["\n"], None], injected=[("", None), ("ok", None), ("", None)],
                  header="Solve the problem step by step, one step a line. " * 6, short_seeds=(0, 1, 2))
    settings = SamplingSettings(max_new_tokens=8, temperature=1.0)
    starts = [{"seed": s} for s in range(4)]
    a, calls, _ = played(env, policy, settings, True, starts, 8, sample_key=9)
    # 32 rows in 2 groups of 16 (the prompts share all but their last tokens), then the one still playing
    assert {key[1] for key in policy.fast_decoder._buckets if key[0] == "grouped"} == {2, 1}
    b, rounds, _ = played(env, policy, settings, False, starts, 8, sample_key=9)
    assert_same(a, b)
    assert calls == 1 and rounds == 3


def test_a_call_with_no_room_for_another_action_hands_the_rest_to_the_next():
    """With room for one action a call (PLAY_ACTIONS, and buckets that round lengths to 16 columns), episodes of
    four actions take several calls and sample the same."""
    import lmgym.episodes.engine as engine_module

    policy = policies(seed=5)
    policy.fast_decoder.length_bucket = 16
    env = make("Arithmetic-v0", mode="stepwise", max_steps=4, level=3)
    settings = SamplingSettings(max_new_tokens=16, temperature=1.0)
    starts = [{"options": {"index": i}} for i in range(2)]
    saved = engine_module.PLAY_ACTIONS
    engine_module.PLAY_ACTIONS = 1
    try:
        a, calls, _ = played(env, policy, settings, True, starts, 4, sample_key=2)
    finally:
        engine_module.PLAY_ACTIONS = saved
    b, rounds, _ = played(env, policy, settings, False, starts, 4, sample_key=2)
    assert_same(a, b)
    assert calls >= 2


def test_without_the_fast_decoder_play_is_advance_until_done():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=3), tok, device="cpu", fast_decode=False)
    assert not policy.can_play
    env = make("Arithmetic-v0", mode="stepwise", max_steps=3, level=2)
    settings = SamplingSettings(max_new_tokens=8, temperature=1.0)
    a, calls, steps = played(env, policy, settings, True, [{"options": {"index": 0}}], 3, sample_key=1)
    b, rounds, _ = played(env, policy, settings, False, [{"options": {"index": 0}}], 3, sample_key=1)
    assert_same(a, b)
    assert calls == rounds and len(steps) == sum(len(x.step_ends) for x in a)


def test_a_single_turn_env_is_sampled_in_plain_calls_with_room_for_one_action():
    """A single-turn env (Arithmetic in "single" mode, max_steps 8) was played in continuous-play calls that kept
    key/value room for 4 actions a row: on one H200, W2's rows decoded over 4.5x the columns, its kept KV buffers
    grew from 4.7 to 16.9 GB and sampling took 6.9 s a step against 4.4. Its rows are now sampled in one plain
    call, whose bucket has room for the prompt and one action."""
    policy = policies(seed=5)
    policy.fast_decoder.length_bucket = 16
    env = make("Arithmetic-v0", level=2)
    settings = SamplingSettings(max_new_tokens=40, temperature=1.0)
    calls = counted_calls(policy)
    a, rounds, _ = played(env, policy, settings, True, [{"options": {"index": 0}}, {"options": {"index": 1}}], 4,
                          sample_key=2)
    b, _, _ = played(env, policy, settings, False, [{"options": {"index": 0}}, {"options": {"index": 1}}], 4,
                     sample_key=2)
    assert_same(a, b)
    assert calls == [] and rounds == 1
    longest = max(len(x.prompt_ids) + settings.max_new_tokens for x in a)
    assert max(key[-1] for key in policy.fast_decoder._buckets) < longest + 16


def varied(n: int) -> str:
    """n characters that do not repeat in a short cycle (a run of one character hides attention errors)."""
    return "".join(chr(97 + (i * 7 + i // 26) % 26) for i in range(n))


def counted_calls(policy):
    calls = []
    play = policy.play
    policy.play = lambda *args, **kwargs: calls.append(kwargs["injected"]) or play(*args, **kwargs)
    return calls


@slow
@pytest.mark.parametrize("overlap", [False, True])
def test_a_turn_longer_than_the_calls_room_goes_on_in_a_call_with_room_for_it(overlap):
    """Tight buckets (16-column ladder): the env's 200-token turns do not fit the first call's room, so its rows
    leave; the engine keeps room for such turns in the next call, where they are fed in one pass each. The same
    tokens as round by round, in a grouped bucket (the rows share a long prompt) and with keyed noise."""
    policy = policies(seed=8, overlap=overlap)
    policy.fast_decoder.length_bucket = 16
    long_text = varied(200)
    env = TurnEnv(stops=[["\n"], ["\n"], ["\n"], None], injected=[(long_text, None)] * 3 + [("", None)],
                  header="Search the documents, then answer. " * 6)
    settings = SamplingSettings(max_new_tokens=6, temperature=1.0, fed_turn_tokens=1024)
    calls = counted_calls(policy)
    a, _, _ = played(env, policy, settings, True, [{"seed": 0}, {"seed": 1}], 4, sample_key=3)
    policy.play = HFPolicy.play.__get__(policy)
    b, rounds, _ = played(env, policy, settings, False, [{"seed": 0}, {"seed": 1}], 4, sample_key=3)
    # float32 on the CPU: about 5e-7 apart; a position off by one in the fed turn moves them 3e-5 to 1e-4 (the tiny
    # model's attention over 600 tokens is diffuse)
    assert_same(a, b, tolerance=1e-5)
    assert rounds == 4 and calls == [FORCED_TOKENS, 256]  # room for the longest turn seen, on the ladder of 64
    assert policy.fast_decoder.stats["extended_tokens"] >= 2 * 4 * 2 * len(long_text)  # turns 2 and 3 of 8 rows
    assert any(key[0] == "grouped" for key in policy.fast_decoder._buckets)


@slow
@pytest.mark.parametrize("fed", [0, 64])
def test_after_a_call_where_no_episode_went_on_the_engine_plays_plain_rounds(fed):
    """The env's turns are longer than the most room a call keeps (fed_turn_tokens): the first call plays one action
    each (and, with fed_turn_tokens 64, makes room for 64 tokens: the second call too), and the engine then plays
    plain rounds (a call in which nothing goes on is a round with more bookkeeping); the same tokens."""
    policy = policies(seed=7)
    policy.fast_decoder.length_bucket = 16
    long_text = varied(300)
    env = TurnEnv(stops=[["\n"], ["\n"], ["\n"], None], injected=[(long_text, None)] * 3 + [("", None)])
    settings = SamplingSettings(max_new_tokens=6, temperature=1.0, fed_turn_tokens=fed)
    calls = counted_calls(policy)
    a, rounds_a, _ = played(env, policy, settings, True, [{"seed": 0}, {"seed": 1}], 2, sample_key=3)
    policy.play = HFPolicy.play.__get__(policy)
    b, rounds_b, _ = played(env, policy, settings, False, [{"seed": 0}, {"seed": 1}], 2, sample_key=3)
    assert_same(a, b)
    assert calls == ([FORCED_TOKENS, 64] if fed else [FORCED_TOKENS]) and rounds_a == rounds_b == 4
    assert policy.fast_decoder.stats["extended_tokens"] == 0


@slow
def test_rag_episodes_with_the_envs_long_turns_play_on_as_round_by_round():
    """The HotpotQA RAG env on a tiny store: its 62-token turns (the nudge a random model earns) do not fit the first
    call's room; from the second call on they are fed in one pass each, and every episode is the round-by-round one."""
    from lmgym.envs import RAGHotpotQAEnv
    from tests.rag_toys import RECORDS
    from tests.test_batched_env_steps import tiny_store

    policy = policies(seed=9, overlap=True)
    store = tiny_store(dense=False)
    runs = []
    for continuous in (True, False):
        env = RAGHotpotQAEnv(records=RECORDS, store=store, k=2, max_searches=2, result_role="tool",
                             search_kwargs={"method": "bm25"})
        settings = SamplingSettings(max_new_tokens=24, temperature=1.0, fed_turn_tokens=1024)
        runs.append(played(env, policy, settings, continuous, [{"options": {"index": i}} for i in range(3)], 4,
                           sample_key=5))
    (a, calls, _), (b, rounds, _) = runs
    assert_same(a, b, tolerance=1e-5)
    assert calls == 2 and rounds == 4
    assert policy.fast_decoder.stats["extended_tokens"] > 0


def test_the_hosts_part_of_a_sync_copies_to_the_device_without_a_stream_sync(monkeypatch):
    """`torch.tensor(values, device=...)` from pageable memory makes the host wait for every queued decode step on
    CUDA (generation.py). Continuous play and the one-pass feed of long turns copy host values only through
    `to_device`/`copy_to` (pinned and asynchronous there), and never index-assign a Python number (PyTorch copies it
    to the device as a pageable one-element tensor, the same wait): a call that continues, feeds long turns, takes
    in waiting prompts and shrinks makes neither."""
    import inspect

    import torch

    from lmgym.policies.decoding import generation as host_copies

    direct, staged = [], []
    plain_tensor, plain_copy = torch.tensor, host_copies.copy_to

    def tensor(*args, **kwargs):
        caller = inspect.stack()[1].filename
        if kwargs.get("device") is not None and caller.endswith(("continuous.py", "extension.py")):
            direct.append(caller)
        return plain_tensor(*args, **kwargs)

    def copy_to(t, device):
        staged.append(tuple(t.shape))
        return plain_copy(t, device)

    plain_setitem = torch.Tensor.__setitem__

    def setitem(self, index, value):
        caller = inspect.stack()[1].filename
        if isinstance(value, (bool, int, float)) and caller.endswith(("continuous.py", "extension.py")):
            direct.append(f"{caller}: [...] = {value!r}")
        return plain_setitem(self, index, value)

    monkeypatch.setattr(torch, "tensor", tensor)
    monkeypatch.setattr(torch.Tensor, "__setitem__", setitem)
    monkeypatch.setattr(host_copies, "copy_to", copy_to)
    policy = policies(seed=4, overlap=True)
    policy.fast_decoder.max_batch = 8  # 9 episodes: one waits, then joins
    env = TurnEnv(stops=[list("aeiou"), ["1", "2", "3"], list("xyz"), None, None],
                  injected=[("=", None), ("42", "tool"), (varied(FORCED_TOKENS + 5), None), ("ok", None), ("", None)],
                  short_seeds=(1,))
    settings = SamplingSettings(max_new_tokens=10, temperature=1.0, fed_turn_tokens=64)
    branches, _, _ = played(env, policy, settings, True, [{"seed": s} for s in range(3)], 3, sample_key=5)
    assert all(b.done for b in branches)
    assert policy.fast_decoder.stats["extended_tokens"] > 0  # a long turn was fed in one pass
    assert policy.fast_decoder.stats["rows_joined"] > 0
    assert direct == []
    assert len(staged) > 10  # continuations, long turns and leaving rows went through to_device/copy_to


@pytest.mark.parametrize("overlap", [False, True])
def test_prompts_past_the_bucket_join_as_rows_free_up_and_play_as_round_by_round(overlap):
    """More episodes than a bucket holds: the first rows start the call and the rest join it as rows finish (their
    prompts fed in one pass behind the next step's column, one pass per distinct prompt), instead of waiting for a
    bucket of their own; every action is still the one the round-by-round engine samples."""
    env = make("Arithmetic-v0", mode="stepwise", max_steps=3, level=2)
    settings = SamplingSettings(max_new_tokens=10, temperature=1.0)
    starts = [{"options": {"index": i}} for i in range(5)]

    def run(refill):
        policy = policies(overlap=overlap)
        policy.fast_decoder.max_batch = 8
        policy.fast_decoder.join_waiting = refill
        branches, _, _ = played(env, policy, settings, True, starts, 4, sample_key=3)
        return branches, policy.fast_decoder.stats

    joined, stats = run(refill=True)
    chunked, chunked_stats = run(refill=False)
    rounds, _, _ = played(env, policies(overlap=overlap), settings, False, starts, 4, sample_key=3)
    assert_same(joined, rounds)
    assert_same(chunked, rounds)
    assert stats["rows_joined"] == 12  # 20 episodes, 8 rows: the 12 others joined the first bucket
    assert stats["buckets_made"] == 1 and chunked_stats["buckets_made"] == 2
    prompts = sorted(b.prompt_ids for b in joined)
    assert 0 < stats["extended_tokens"] < sum(len(p) - 1 for p in prompts[8:])  # joined together: fed once


def test_prompts_that_join_together_are_fed_in_passes_of_bounded_rows(monkeypatch):
    """A pass copies its rows' whole key/value rows, so joining prompts are fed JOIN_PASS_ROWS rows at most a pass
    (here 2), with the same actions as round by round."""
    from lmgym.policies.decoding import continuous

    passes = []
    feed = continuous.extend_rows

    def counted(decoder, buf, rows, *args):
        passes.append(len(rows))
        return feed(decoder, buf, rows, *args)

    monkeypatch.setattr(continuous, "JOIN_PASS_ROWS", 2)
    monkeypatch.setattr(continuous, "extend_rows", counted)
    # no stop strings: every action runs to its cap, so the even seeds' one-turn episodes end at one sync together
    env = TurnEnv(stops=[None, None, None], injected=[("=", None), ("ok", None), ("", None)],
                  short_seeds=range(0, 16, 2))
    settings = SamplingSettings(max_new_tokens=6, temperature=1.0)
    starts = [{"seed": s} for s in range(16)]
    policy = policies()
    policy.fast_decoder.max_batch = 8
    joined, _, _ = played(env, policy, settings, True, starts, 1, sample_key=3)
    rounds, _, _ = played(env, policies(), settings, False, starts, 1, sample_key=3)
    assert_same(joined, rounds)
    assert policy.fast_decoder.stats["rows_joined"] >= 4 and passes and max(passes) <= 2


@pytest.mark.parametrize("overlap", [False, True])
def test_a_tail_bucket_syncs_more_often_with_the_same_actions_in_fewer_steps(overlap):
    """`tail_sync_every` (a bucket of TAIL_ROWS rows or fewer): rows whose action ended wait fewer steps for the
    host, so the same episodes (the round-by-round engine's actions) take fewer decode steps."""
    env = make("Arithmetic-v0", mode="stepwise", max_steps=4, level=2)
    settings = SamplingSettings(max_new_tokens=12, temperature=1.0)
    starts = [{"options": {"index": i}} for i in range(3)]

    def run(tail_sync_every):
        policy = policies(overlap=overlap)
        policy.fast_decoder.tail_sync_every = tail_sync_every
        policy.fast_decoder.shape_steps = {}
        branches, _, _ = played(env, policy, settings, True, starts, 2, sample_key=5)
        return branches, sum(steps for steps, _ in policy.fast_decoder.shape_steps.values())

    usual, usual_steps = run(None)
    often, often_steps = run(1)
    rounds, _, _ = played(env, policies(overlap=overlap), settings, False, starts, 2, sample_key=5)
    assert_same(usual, rounds)
    assert_same(often, rounds)
    assert often_steps < usual_steps
