"""The fast decoder decodes text only at tokens that can complete a stop string (stop_tokens.py), and cuts
every row at the same token as the plain path's check of every position."""
import pytest
import torch

from lmgym.policies import build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding import generation
from lmgym.policies.decoding.fast import FastDecoder
from lmgym.policies.decoding.generation import RowKeys, decode
from lmgym.policies.decoding.stop_tokens import StopTokens, filterable


@pytest.fixture(scope="module")
def model_and_tokenizer():
    tok = build_tiny_tokenizer()
    return build_tiny_model(tok, seed=3).eval(), tok


def prompts(tok, n):
    return [tok(f"step {i}: " + "ab" * (i % 4))["input_ids"] for i in range(n)]


@pytest.mark.parametrize("stops", [["Yh"], ["e Z", "</s>"], ["\n"], ["Q"], ["é"], ["e "],
                                   [["Yh"], None, ["Q"]] * 4])
def test_cut_at_the_same_token_as_the_plain_path(model_and_tokenizer, stops):
    model, tok = model_and_tokenizer
    batch = prompts(tok, 12)
    plain = decode(model, tok, batch, 40, temperature=1.0, stop=stops, generator=RowKeys(list(range(12))))
    fast = FastDecoder(model, sync_every=6).generate(tok, batch, 40, temperature=1.0, stop=stops,
                                                       generator=RowKeys(list(range(12))))
    assert [g.completion_ids for g in fast] == [g.completion_ids for g in plain]
    assert [g.finish_reason for g in fast] == [g.finish_reason for g in plain]
    assert any(g.finish_reason == "stop" for g in plain) or stops == ["é"]


def test_marks_the_tokens_holding_a_stop_strings_last_character(model_and_tokenizer):
    _, tok = model_and_tokenizer
    marks = StopTokens(tok, {"</answer>", "\n"}, torch.device("cpu"))
    marked = {tok.convert_ids_to_tokens(i) for i in marks.mask.nonzero().squeeze(-1).tolist()}
    assert marked == {">", "\n"} and not marks.everything
    assert StopTokens(tok, {"é"}, torch.device("cpu")).everything  # not one byte: every token is checked
    assert StopTokens(tok, {"ends with a space "}, torch.device("cpu")).mask.all()
    assert filterable("</search>") and filterable("\n") and not filterable("x ") and not filterable("")


def test_text_is_decoded_only_at_marked_tokens(model_and_tokenizer, monkeypatch):
    """128 rows x 48 tokens: the exact check runs at the few positions holding 'q', not at each of ~6,000."""
    model, tok = model_and_tokenizer
    calls = []
    hit = generation.StopChecker.hit
    monkeypatch.setattr(generation.StopChecker, "hit", lambda self, row, ids: calls.append(row) or hit(self, row, ids))
    batch = prompts(tok, 128)
    out = FastDecoder(model, sync_every=8).generate(tok, batch, 48, temperature=1.0, stop=["xq"],
                                                    generator=RowKeys(list(range(128))))
    sampled = sum(len(g.completion_ids) for g in out)
    holding_q = sum(g.text.count("q") for g in out)
    assert sampled > 2000 and len(calls) <= holding_q + 128 < sampled // 4


def test_the_mask_is_made_once_per_tokenizer_and_last_characters(model_and_tokenizer, monkeypatch):
    from lmgym.policies.decoding import stop_tokens

    _, tok = model_and_tokenizer
    first = StopTokens(tok, {"</search>", "</answer>"}, torch.device("cpu"))
    monkeypatch.setattr(stop_tokens, "vocab_texts", lambda tokenizer: pytest.fail("the mask was made again"))
    again = StopTokens(tok, {"</answer>", "<x>"}, torch.device("cpu"))  # the same last character
    assert again.mask is first.mask
