"""`encode_turns` tokenises many injected turns in one tokenizer call and gives each the ids `encode_turn`
(`encode_text` for raw text) gives it alone; policies with their own encoding are asked turn by turn."""
import pytest

from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer, encode_turns


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return build_tiny_model(tokenizer, seed=0)


def turns_for(tokenizer):
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    answer = tokenizer("<search>x</search>", add_special_tokens=False)["input_ids"]
    return [
        ("<result>[1] Dijon\nDijon is a city.</result>", "tool", answer),
        ("<result>[1] Dijon\nDijon is a city.</result>", "tool", answer + [eos]),  # it closed its own turn
        ("Call a tool, or answer.", "user", answer),
        ("\n", None, answer),
        ("<result>error: empty query</result>", None, []),
        ("tab\tand ünïcode", "tool", []),
    ]


@pytest.mark.parametrize("chat", [True, False])
def test_encode_turns_gives_each_turn_the_ids_encode_turn_gives_it_alone(tokenizer, model, chat, monkeypatch):
    policy = HFPolicy(model, tokenizer, device="cpu", use_chat_template=chat)
    turns = turns_for(tokenizer)
    calls, tokenize = [], type(tokenizer).__call__

    def counting(self, text, *args, **kwargs):
        calls.append(text)
        return tokenize(self, text, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(type(tokenizer), "__call__", counting)
        together = encode_turns(policy, turns)
    alone = [policy.encode_text(text) if role is None else policy.encode_turn(text, role, after)
             for text, role, after in turns]
    assert together == alone
    assert len(calls) == 1 and len(calls[0]) == len(turns)  # one tokenizer call for every turn
    if chat:
        assert together[0][0] == tokenizer.convert_tokens_to_ids("<|im_end|>") and together[1] == together[0][1:]
    assert encode_turns(policy, []) == []


def test_a_policy_with_its_own_encoding_is_asked_turn_by_turn_and_bad_turns_are_one_line_errors(tokenizer, model):
    class Shouting(HFPolicy):
        def encode_text(self, text):
            return super().encode_text(text.upper())

    class Batching(HFPolicy):
        def encode_turns(self, turns):
            return [[len(text)] for text, _, _ in turns]

    shouting = Shouting(model, tokenizer, device="cpu", use_chat_template=False)
    turns = turns_for(tokenizer)
    assert encode_turns(shouting, turns) == [shouting.encode_turn(t, r, a) if r else shouting.encode_text(t)
                                             for t, r, a in turns]
    assert encode_turns(Batching(model, tokenizer, device="cpu"), turns) == [[len(t)] for t, _, _ in turns]
    policy = HFPolicy(model, tokenizer, device="cpu")
    with pytest.raises(ValueError, match=r"^encode_turns: each turn's text must be a str; got int$"):
        encode_turns(policy, [("ok", "tool", []), (3, "tool", [])])
    with pytest.raises(ValueError, match=r"^encode_turn: role must be a non-empty string"):
        encode_turns(policy, [("ok", "", [])])
