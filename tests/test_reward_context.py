"""What a reward function may change: its own copy of the episode's context, never another function's view nor
the env's info. The toolkit's own functions are marked `reads_only` and share one copy; they never change it."""
import copy

import pytest

import lmgym.envs.base as env_base
from lmgym.envs import ArithmeticEnv, RAGHotpotQAEnv, reads_only
from lmgym.envs.rewards import functions
from lmgym.envs.rewards.forms import shares_context
from tests.rag_toys import RECORDS, LetterEmbedder, ToyStore


def test_an_unmarked_function_that_changes_its_info_changes_nothing_the_others_see():
    seen = []

    def vandal(completion, gold, info):
        info["parsed_answer"] = "vandalised"
        info["retrieved"].clear()
        info["fields"]["gold"] = "vandalised"
        return 0.0

    def reader(completion, gold, info):
        seen.append((info["parsed_answer"], len(info["retrieved"]), info["fields"]["gold"]))
        return 1.0

    fns = {"vandal": vandal, "reader": reads_only(reader), "vandal2": vandal, "reader2": reads_only(reader)}
    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), k=2, reward_fns=fns)
    env.reset(options={"index": 0})
    env.step("<search>Gustave Eiffel born</search>")
    info = env.step("<answer>Dijon</answer>")[4]
    assert seen == [("Dijon", 2, "Dijon")] * 2
    assert info["parsed_answer"] == "Dijon" and len(info["retrieved"]) == 2
    assert info["reward_components"]["reader"] == 1.0


def test_marked_functions_share_one_copy_and_unmarked_ones_get_their_own(monkeypatch):
    given = []
    real = env_base.call_reward
    monkeypatch.setattr(env_base, "call_reward", lambda fn, c, g, context, t: (given.append(context), real(
        fn, c, g, context, t))[1])
    fns = {"a": reads_only(lambda c, g, i: 1.0), "b": lambda c, g, i: 1.0, "c": reads_only(lambda c, g, i: 1.0)}
    env = ArithmeticEnv(level=0, reward_fns=fns)
    env.reset(seed=0)
    env.step("1")
    assert given[0] is given[2] and given[1] is not given[0] and given[1] == given[0]


@pytest.mark.parametrize("answer", ["<answer>Dijon, France</answer>", "So: <answer>no idea</answer>",
                                    "<answer>Big Ben</answer>"])
def test_the_toolkits_own_reward_functions_never_change_their_context(monkeypatch, answer):
    """Each function marked reads_only (the RAG env's defaults and envs/rewards/functions.py's) gets its context
    back unchanged, on finished RAG and arithmetic episodes."""
    checked = []
    real = env_base.call_reward

    def checking(fn, completion, gold, context, timeout):
        before = copy.deepcopy(context)
        result = real(fn, completion, gold, context, timeout)
        assert context == before, getattr(fn, "__name__", fn)
        if shares_context(fn):
            checked.append(fn.__name__)
        return result

    monkeypatch.setattr(env_base, "call_reward", checking)
    rag = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), k=2, embedder=LetterEmbedder())
    rag.reset(options={"index": 0})
    rag.step("<search>Big Ben London</search>")
    rag.step(answer)
    fns = {name: getattr(functions, name) for name in ("correctness_reward", "accuracy_reward", "format_reward")}
    arithmetic = ArithmeticEnv(level=0, reward_fns=fns)
    arithmetic.reset(seed=0)
    arithmetic.step(answer)
    assert checked == ["exact_match_reward", "f1_reward", "mrr_reward", "support_recall_reward",
                       "redundant_search_reward", "format_reward", "strict_format_reward", *fns]
