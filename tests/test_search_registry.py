"""One registry of search methods: a method registered in one place is accepted by the config
(`SearchSettings`), `run_search`, the search CLI (examples/search_eval.py) and the server (/solve, /health and
the OpenAI route's `search` field); unregistering it restores every one of them."""
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lmgym.core.checked_config import ConfigError
from lmgym.envs import QuestionsEnv
from lmgym.search import SearchSettings, register_search_method, run_search, search_methods, unregister_search_method
from lmgym.search.search import greedy_search
from lmgym.serving import create_app
from tests.search_toys import ScriptedPolicy
from tests.test_examples import load_script
from tests.tiers import slow

SEARCH_EVAL = Path(__file__).resolve().parents[1] / "examples" / "search_eval.py"
SCRIPT = {"": ["3 + 4 = 7\n"], "3 + 4 = 7\n": ["#### 7\n"]}
QUESTION = "What is 3 + 4?"


@pytest.fixture
def first_of_n():
    """A new method, registered here only: greedy, recording the budget (`n`) each run was given."""
    budgets: list[int] = []

    def search(policy, env, starts, settings, scorer, generator):
        budgets.append(settings.n)
        return greedy_search(policy, env, starts, settings, scorer, generator)

    before = search_methods()
    register_search_method("first_of_n", search, budget="n", label=lambda s: f"first_of_{s.n}")
    try:
        yield budgets
    finally:
        unregister_search_method("first_of_n")
    assert search_methods() == before


def test_a_registered_method_is_accepted_by_the_config_and_run_search(first_of_n):
    settings = SearchSettings(method="first_of_n", n=3)
    assert settings.label == "first_of_3"
    assert SearchSettings(method="first_of_n", n=3, max_tokens=40).label == "first_of_n@40tok"
    env = QuestionsEnv([QUESTION], max_steps=2)
    (result,) = run_search(ScriptedPolicy(SCRIPT), env, [{"options": {"index": 0}}], settings)
    assert result.answer == "7" and first_of_n == [3]


def test_a_registered_method_is_accepted_by_the_search_cli(first_of_n):
    cli = load_script(SEARCH_EVAL)
    assert cli.chosen_methods(cli.parse(["--methods", "greedy,first_of_n"])) == ["greedy", "first_of_n"]
    assert "first_of_n" in cli.build_parser().format_help()


@slow
def test_a_registered_method_is_accepted_by_the_server(first_of_n):
    client = TestClient(create_app(ScriptedPolicy(SCRIPT)))
    assert client.get("/health").json()["methods"] == ["greedy", "maj", "first_of_n"]  # no PRM: no scored methods
    solved = client.post("/solve", json={"question": QUESTION, "method": "first_of_n", "budget": 2})
    assert solved.status_code == 200, solved.text
    assert solved.json()["answer"] == "7" and solved.json()["method"] == "first_of_n"
    model = client.get("/v1/models").json()["data"][0]["id"]
    completion = client.post("/v1/completions", json={"model": model, "prompt": QUESTION,
                                                       "search": {"method": "first_of_n", "n": 3}})
    assert completion.status_code == 200, completion.text
    assert first_of_n == [2, 3]  # each route's budget set the method's budget field


def test_unregistering_restores_the_config_the_cli_and_the_server():
    with pytest.raises(ConfigError, match=r"^SearchSettings.method must be greedy \| maj \| weighted_maj \| "
                                          r"best_of_n \| beam \| mcts, got 'first_of_n'$"):
        SearchSettings(method="first_of_n")
    cli = load_script(SEARCH_EVAL)
    with pytest.raises(ValueError, match=r"^--methods: 'first_of_n'; choose from greedy, maj, weighted_maj"):
        cli.chosen_methods(cli.parse(["--methods", "first_of_n"]))
    client = TestClient(create_app(ScriptedPolicy(SCRIPT)))
    assert "first_of_n" not in client.get("/health").json()["methods"]
    refused = client.post("/solve", json={"question": QUESTION, "method": "first_of_n"})
    assert refused.status_code == 422 and "Input should be 'greedy', 'maj', 'weighted_maj'" in refused.json()["detail"]
    with pytest.raises(KeyError, match="no search method 'first_of_n' is registered"):
        unregister_search_method("first_of_n")


def test_registering_checks_the_name_and_the_search_function():
    with pytest.raises(ValueError, match=r"name must be an identifier"):
        register_search_method("first of n", greedy_search)
    with pytest.raises(ValueError, match=r"run must be a function or a 'module:function' string"):
        register_search_method("first_of_n", "greedy_search")
    assert "first_of_n" not in search_methods()
