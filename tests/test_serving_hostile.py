"""Hostile bodies against the server on the tiny model (its real fast tokenizer): never a 5xx, always one line.
Text no tokenizer can encode (a lone surrogate, bytes that are not UTF-8) is a 400 naming the field on every
route."""
import re

import pytest
from fastapi.testclient import TestClient

from lmgym.serving import ServerLimits, create_app

MODEL = '"model": "HFPolicy"'
USER = '{"role": "user", "content": "hi"}'
DEEP = "[" * 50_000 + "]" * 50_000  # past the JSON parser's recursion limit


@pytest.fixture(scope="module")
def client():
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    with TestClient(create_app(policy, limits=ServerLimits(max_new_tokens=8)), raise_server_exceptions=False) as c:
        yield c


COMPLETIONS = [
    '{%s, "prompt": "a\\ud800b"}' % MODEL,
    '{%s, "prompt": ["ok", "\\udfff"]}' % MODEL,
    '{%s, "prompt": "hi", "stop": "\\ud800"}' % MODEL,
    '{%s, "prompt": "hi", "stop": ["ok", "x\\udc80"]}' % MODEL,
    '{%s, "prompt": "hi", "user": "\\ud83d"}' % MODEL,
    '{"model": "\\ud800", "prompt": "hi"}',
    '{%s, "prompt": "hi", "\\ud800": 1}' % MODEL,
    '{%s, "prompt": "hi", "search": {"method": "\\ud800"}}' % MODEL,
    b'{"model": "HFPolicy", "prompt": "\xff\xfe"}',
    b'{"model": "HFPolicy", "prompt": "hi", "\xc3\x28": 1}',
    '{%s, "prompt": 5}' % MODEL,
    '{%s, "prompt": null}' % MODEL,
    '{%s, "prompt": []}' % MODEL,
    '{%s, "prompt": [""]}' % MODEL,
    '{%s, "prompt": [[1, 2]]}' % MODEL,
    '{%s, "prompt": {"a": 1}}' % MODEL,
    '{%s, "prompt": "hi", "max_tokens": 1e308}' % MODEL,
    '{%s, "prompt": "hi", "max_tokens": 1%s}' % (MODEL, "0" * 40),
    '{%s, "prompt": "hi", "n": 1%s}' % (MODEL, "0" * 30),
    '{%s, "prompt": "hi", "n": 0}' % MODEL,
    '{%s, "prompt": "hi", "max_tokens": -1}' % MODEL,
    '{%s, "prompt": "hi", "max_tokens": 2, "seed": 1%s}' % (MODEL, "0" * 40),
    '{%s, "prompt": "hi", "max_tokens": 2, "seed": -1%s}' % (MODEL, "0" * 40),
    '{%s, "prompt": "hi", "temperature": 1e999}' % MODEL,
    '{%s, "prompt": "hi", "temperature": NaN}' % MODEL,
    '{%s, "prompt": "hi", "top_p": -1}' % MODEL,
    '{%s, "prompt": "hi", "stream": "yes"}' % MODEL,
    '{%s, "prompt": "hi", "stream_options": {"include_usage": [1]}}' % MODEL,
    '{%s, "prompt": "hi", "logit_bias": {"1": 100}}' % MODEL,
    '{%s, "prompt": "hi", "stop": ["a", "b", "c", "d", "e"]}' % MODEL,
    '{%s, "prompt": "hi", "search": {"method": "mcts", "n": 1%s}}' % (MODEL, "0" * 30),
    '{%s, "prompt": "hi", "search": [[[[{}]]]]}' % MODEL,
    '{%s, "prompt": %s}' % (MODEL, DEEP),
    DEEP,
    "null", "[]", '"x"', "", "{", "1e999", "{}",
]
CHAT = [
    '{%s, "messages": []}' % MODEL,
    '{%s, "messages": "hi"}' % MODEL,
    '{%s, "messages": [5]}' % MODEL,
    '{%s, "messages": [{"role": "user"}]}' % MODEL,
    '{%s, "messages": [{"role": "tool", "content": "hi"}]}' % MODEL,
    '{%s, "messages": [{"role": "user", "content": "\\ud800"}]}' % MODEL,
    '{%s, "messages": [{"role": "user", "content": [{"type": "text", "text": "a\\udfff"}]}]}' % MODEL,
    '{%s, "messages": [{"role": "user", "content": "hi", "name": "\\udbff"}]}' % MODEL,
    '{%s, "messages": [{"role": "\\ud800", "content": "hi"}]}' % MODEL,
    b'{"model": "HFPolicy", "messages": [{"role": "user", "content": "\x80abc"}]}',
    '{%s, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]}' % MODEL,
    '{%s, "messages": [{"role": "user", "content": null}]}' % MODEL,
    '{%s, "messages": [{"role": "user", "content": {"a": [1, {"b": null}]}}]}' % MODEL,
    '{%s, "messages": [%s]}' % (MODEL, ", ".join([USER] * 3000)),
    '{%s, "messages": [%s], "max_completion_tokens": 1%s}' % (MODEL, USER, "0" * 30),
    '{%s, "messages": [%s], "stop": [""]}' % (MODEL, USER),
    '{%s, "messages": [%s], "n": 2, "max_tokens": 2, "stream": true, "seed": 1%s}' % (MODEL, USER, "0" * 30),
]


def unencodable(body: str | bytes) -> bool:
    """Whether `body` holds a lone surrogate's escape or bytes that are not UTF-8."""
    if isinstance(body, bytes):
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False
    return re.search(r"\\u[dD][89a-fA-F]", body) is not None


def post(client, route, body):
    content = body if isinstance(body, bytes) else body.encode()
    return client.post(route, content=content, headers={"content-type": "application/json"})


@pytest.mark.parametrize("route, body", [("/v1/completions", b) for b in COMPLETIONS]
                         + [("/v1/chat/completions", b) for b in CHAT])
def test_a_hostile_body_gets_no_5xx_and_one_line_in_openais_shape(client, route, body):
    response = post(client, route, body)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert isinstance(error["message"], str) and error["message"] and "\n" not in error["message"]
        assert len(error["message"]) < 400
    if unencodable(body):
        assert response.status_code == 400, response.text
        message = response.json()["error"]["message"]
        assert "lone surrogate" in message or "not valid UTF-8" in message


@pytest.mark.parametrize("route, body, field", [
    ("/generate", '{"prompt": "a\\ud800"}', "prompt"),
    ("/solve", '{"question": "\\udfffWhat is 1 + 1?"}', "question"),
    ("/generate", b'{"prompt": "\xff"}', "the body"),
    ("/solve", b'{"question": "\xe2\x82"}', "the body"),
])
def test_text_no_tokenizer_can_encode_is_a_400_on_generate_and_solve_too(client, route, body, field):
    response = post(client, route, body)
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert detail.startswith(field) and "\n" not in detail
    assert "lone surrogate" in detail or "not valid UTF-8" in detail
