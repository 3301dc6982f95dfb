"""The search server through fastapi's TestClient (a real HTTP client over the ASGI app), the
QuestionsEnv it plays, and examples/serve.py's app on the tiny model."""
import warnings
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from gymnasium.utils.env_checker import check_env

from lmgym.envs import QuestionsEnv, make
from lmgym.serving import ServerLimits, create_app
from lmgym.serving import limits as limits_module
from lmgym.training.config import ConfigError
from tests.search_toys import ScriptedPolicy, ScriptedScorer
from tests.test_examples import error_line, load_script
from tests.tiers import slow
from tests.tiny_models import save_tiny_model_dir

SERVE = Path(__file__).resolve().parents[1] / "examples" / "serve.py"
SCRIPT = {"": ["3 + 4 = 7\n", "3 + 4 = 8\n"], "3 + 4 = 7\n": ["#### 7\n"], "3 + 4 = 8\n": ["#### 8\n"]}


def one_line_detail(response, status):
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    return detail


def test_questions_env_plays_user_questions_without_gold():
    env = make("Questions-v0", questions=["What is 3 + 4?", "What is 2 * 5?"])
    assert isinstance(env, QuestionsEnv) and env.mode == "stepwise" and env.num_problems == 2
    observation, info = env.reset(options={"index": 1})
    assert observation == "What is 2 * 5? Give the final answer after ####.\n" and info["gold"] == ""
    _, reward, terminated, _, info = env.step("#### 10\n")
    assert terminated and info["parsed_answer"] == "10" and info["correct"] is False and reward == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make("Questions-v0", questions=["What is 1 + 1?"]))
    with pytest.raises(ValueError, match=r"^questions\[1\] must be a non-blank string; got ' '$"):
        QuestionsEnv(["What is 1 + 1?", " "])
    with pytest.raises(ValueError, match=r"^questions must be a non-empty list of strings; got str$"):
        QuestionsEnv("What is 1 + 1?")


def test_solve_answers_with_each_method():
    scorer = ScriptedScorer({"3 + 4 = 8\n": 0.9, "3 + 4 = 7\n": 0.1})
    client = TestClient(create_app(ScriptedPolicy(SCRIPT), scorer))
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["prm"]
    assert health["methods"] == ["greedy", "maj", "weighted_maj", "best_of_n", "beam", "mcts"]
    greedy = client.post("/solve", json={"question": "What is 3 + 4?", "method": "greedy"})
    assert greedy.status_code == 200
    assert greedy.json() == {"answer": "7", "solution": "3 + 4 = 7\n#### 7\n", "tokens": 17, "method": "greedy"}
    best = client.post("/solve", json={"question": "What is 3 + 4?", "method": "best_of_n", "budget": 2}).json()
    assert best["answer"] == "8" and best["tokens"] == 34  # the scorer's favourite; both samples counted
    beam = client.post("/solve", json={"question": "What is 3 + 4?", "method": "beam", "budget": 1}).json()
    assert beam["answer"] == "8" and beam["method"] == "beam"
    mcts = client.post("/solve", json={"question": "What is 3 + 4?", "method": "mcts", "budget": 4}).json()
    assert mcts["answer"] == "8" and mcts["solution"] == "3 + 4 = 8\n#### 8\n" and mcts["method"] == "mcts"
    maj = client.post("/solve", json={"question": "What is 3 + 4?", "method": "maj", "budget": 3}).json()
    assert maj["answer"] in {"7", "8"} and maj["tokens"] == 51


def test_generate_samples_from_the_real_tiny_policy(tiny_policy):
    client = TestClient(create_app(tiny_policy))
    body = client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 5}).json()
    assert isinstance(body["text"], str) and 1 <= body["tokens"] <= 5
    again = client.post("/generate", json={"prompt": "Hello", "max_new_tokens": 5}).json()
    assert again == body  # temperature 0 by default


def test_bad_requests_get_a_4xx_with_one_message():
    limits = ServerLimits(max_prompt_chars=20, max_new_tokens=8, max_budget=4)
    policy = ScriptedPolicy(SCRIPT)
    client = TestClient(create_app(policy, limits=limits))
    assert "max_prompt_chars" in one_line_detail(client.post("/solve", json={"question": "x" * 21}), 413)
    assert "prompt is 21 characters; this server takes at most 20" in one_line_detail(
        client.post("/generate", json={"prompt": "x" * 21}), 413)
    assert "max_new_tokens 9 is over this server's limit of 8" in one_line_detail(
        client.post("/generate", json={"prompt": "hi", "max_new_tokens": 9}), 422)
    assert "budget 5 is over this server's limit of 4" in one_line_detail(
        client.post("/solve", json={"question": "What is 3 + 4?", "method": "maj", "budget": 5}), 422)
    detail = one_line_detail(client.post("/solve", json={"question": "What is 3 + 4?", "method": "dfs"}), 422)
    assert detail.startswith("method: Input should be 'greedy', 'maj', 'weighted_maj', 'best_of_n', 'beam' or 'mcts'")
    for method in ("weighted_maj", "best_of_n", "beam", "mcts"):
        assert f"method {method} needs a PRM, and this server has none" in one_line_detail(
            client.post("/solve", json={"question": "What is 3 + 4?", "method": method}), 400)
    assert one_line_detail(client.post("/solve", json={"question": "hi", "temperature": 1}), 422) == (
        "temperature: Extra inputs are not permitted")
    assert one_line_detail(client.post("/solve", content="{not json", headers={"content-type": "application/json"}),
                           422).startswith("the body is not valid JSON: Expecting property name")
    assert policy.calls == []  # nothing was computed for a bad request


@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_a_non_finite_temperature_is_refused_in_one_line(number):
    policy = ScriptedPolicy(SCRIPT)
    client = TestClient(create_app(policy))
    body = f'{{"prompt": "hi", "max_new_tokens": 2, "temperature": {number}}}'  # Python's json reads these
    detail = one_line_detail(client.post("/generate", content=body, headers={"content-type": "application/json"}),
                             422)
    assert detail == "temperature: Input should be a finite number"
    assert policy.calls == []


def test_health_names_the_model_without_a_path_of_the_servers_disk(tmp_path, monkeypatch):
    policy = ScriptedPolicy(SCRIPT)
    folder = tmp_path / "runs" / "my-model"
    folder.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    for name_or_path, shown in ((str(folder), "my-model"), (str(folder) + "/", "my-model"),
                                ("runs/my-model", "my-model"), ("./runs/my-model", "my-model"),
                                ("C:\\models\\my-model", "my-model"),
                                ("HuggingFaceTB/SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M"),
                                ("embedded:SmolLM2-135M-Instruct", "embedded:SmolLM2-135M-Instruct"),
                                (None, "ScriptedPolicy")):
        policy.name_or_path = name_or_path
        response = TestClient(create_app(policy)).get("/health")
        assert response.json()["model"] == shown
        assert str(tmp_path) not in response.text


def test_a_request_body_over_the_cap_is_refused_before_it_is_parsed():
    assert ServerLimits().max_body_bytes == 1_000_000
    policy = ScriptedPolicy(SCRIPT)
    client = TestClient(create_app(policy, limits=ServerLimits(max_body_bytes=100)))
    json_header = {"content-type": "application/json"}
    over = b"{" + b"x" * 100  # not JSON either: the size is refused before any parsing
    assert one_line_detail(client.post("/generate", content=over, headers=json_header), 413) == (
        "the request body is 101 bytes; this server takes at most 100 (max_body_bytes)")
    chunked = iter([b"{" + b" " * 60, b" " * 60, b"}"])  # no Content-Length: counted as it streams in
    assert one_line_detail(client.post("/solve", content=chunked, headers=json_header), 413) == (
        "the request body is over 100 bytes; this server takes at most 100 (max_body_bytes)")
    assert policy.calls == []
    fits = b'{"question": "What is 3 + 4?"}'.ljust(100)
    assert client.post("/solve", content=fits, headers=json_header).json()["answer"] == "7"
    streamed = iter([b'{"question": ', b'"What is 3 + 4?"}'])
    assert client.post("/solve", content=streamed, headers=json_header).json()["answer"] == "7"
    default = TestClient(create_app(ScriptedPolicy(SCRIPT)))
    big = {"prompt": "x" * 1_000_001}
    assert "this server takes at most 1000000 (max_body_bytes)" in one_line_detail(
        default.post("/generate", json=big), 413)


def test_a_request_whose_compute_runs_past_the_timeout_gets_504(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(limits_module.time, "monotonic", lambda: clock[0])

    class Slow(ScriptedPolicy):
        def sample(self, *args, **kwargs):
            clock[0] += 10.0  # each sampling call takes 10 s on the fake clock
            return super().sample(*args, **kwargs)

    policy = Slow({"": ["a\n"], "a\n": ["b\n"], "a\nb\n": ["#### 7\n"]})
    client = TestClient(create_app(policy, limits=ServerLimits(timeout_seconds=15)))
    detail = one_line_detail(client.post("/solve", json={"question": "What is 3 + 4?"}), 504)
    assert detail.startswith("the request ran over this server's timeout of 15 s (timeout_seconds)")
    assert policy.calls == [1, 1]  # the third step was never sampled: checked at 20 s
    clock[0] = 0.0
    policy.script = {"": ["#### 7\n"]}
    assert client.post("/solve", json={"question": "What is 3 + 4?"}).json()["answer"] == "7"  # the lock was freed


def test_limits_and_settings_are_checked_when_the_app_is_made():
    with pytest.raises(ConfigError, match=r"^ServerLimits.max_budget must be > 0, got 0$"):
        ServerLimits(max_budget=0)
    from lmgym.search import SearchSettings

    with pytest.raises(ConfigError, match=r"^SearchSettings.temperature must be > 0 for maj"):
        create_app(ScriptedPolicy({}), search=SearchSettings(temperature=0))


@slow
def test_serve_script_builds_the_app_over_a_model_folder_and_a_prm_folder(tmp_path_factory):
    from lmgym.policies import HFPolicy, ProcessRewardModel, build_tiny_model

    serve = load_script(SERVE)
    model, prm = save_tiny_model_dir(tmp_path_factory, build_tiny_model), tmp_path_factory.mktemp("prm")
    ProcessRewardModel.from_policy(HFPolicy(model, device="cpu")).save(prm)
    common = ["--model", model, "--max_budget", "2", "--step_tokens", "4", "--max_steps", "2", "--expand_k", "2"]
    plain = TestClient(serve.build_app(serve.build_parser().parse_args(common)))
    assert plain.get("/health").json()["methods"] == ["greedy", "maj"]
    assert plain.get("/health").json()["model"] == Path(model).name
    solved = plain.post("/solve", json={"question": "What is 1 + 1?", "method": "maj", "budget": 2}).json()
    assert set(solved) == {"answer", "solution", "tokens", "method"} and 0 < solved["tokens"] <= 2 * 2 * 4
    with_prm = TestClient(serve.build_app(serve.build_parser().parse_args(common + ["--prm", str(prm)])))
    assert with_prm.get("/health").json()["methods"] == ["greedy", "maj", "weighted_maj", "best_of_n", "beam", "mcts"]
    tree = with_prm.post("/solve", json={"question": "What is 1 + 1?", "method": "mcts", "budget": 2}).json()
    assert tree["method"] == "mcts" and 0 < tree["tokens"] <= 2 * 2 * 4 + 2 * 4  # 2 simulations, greedy finish
    assert "ServerLimits.timeout_seconds must be > 0" in error_line(serve, ["--timeout_seconds", "0"])
