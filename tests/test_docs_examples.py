"""The docs' runnable code blocks run as shown on the tiny model, and do what the page says: a newcomer can
register an env, subclass RLAlgorithm, train a RAG agent and serve a model from the docs alone."""
import json

import pytest
import torch

from lmgym.moved import MOVED
from tests.doc_blocks import DOCS, ROOT, docs_pages, python_blocks, reader, run_block  # noqa: F401  (reader: a fixture)
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

BLOCKS = [block for page in docs_pages() for block in python_blocks(page, runnable_only=True)]
LIBRARY = ("core", "retrieval", "envs", "buffers", "policies", "episodes", "training", "search",
           "evaluation", "traindata", "algorithms", "serving")


def metrics(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def check_register_env(ns, folder):
    """The env registered in three lines plays as the page says (the README's test before 0.2.0)."""
    env = ns["make"]("Capitals-v0", instruction="", reward_fns={"exact": lambda text, gold, info: float(gold in text)})
    observation, info = env.reset(options={"index": 1})
    assert observation == "What is the capital of Peru?" and info["gold"] == "Lima"
    _, reward, terminated, _, _ = env.step("It is Lima.")
    assert reward == 1.0 and terminated
    env.reset(options={"index": 0})
    assert env.step("Lyon")[1] == 0.0
    assert ns["reward"] == 1.0 and ns["terminated"]


def check_reward_forms(ns, folder):
    assert ns["reward"] == 1.0


def check_dataset_env(ns, folder):
    assert ns["messages"] == ns["rows"][0]["prompt"] and ns["reward"] == 1.0


def check_subclass_trains(ns, folder):
    """The block trained as shown, and the class it defines learns: on a toy env where the tiny model earns
    rewards, a step moves the weights (the README's test before 0.2.0)."""
    from lmgym.algorithms import RLConfig
    from lmgym.envs import make
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    rows = metrics(folder / "runs" / "reinforce")
    assert [row["iteration"] for row in rows] == [0, 1, 2, 3] and all("loss_policy" in r for r in rows[1:])
    assert len(ns["rows"]) == 4
    tokenizer = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tokenizer, seed=0), tokenizer, device="cpu")
    config = RLConfig(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=6,
                      output_dir=str(folder / "toy"), progress=False, eval_at_start=False, learning_rate=1e-3)
    before = [p.detach().clone() for p in policy.parameters()]
    assert len(ns["Reinforce"](policy, make("ToyDigits-v0"), config).train()) == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters()))


def check_rag(ns, folder):
    """The index finds the right paragraph, and GRPO trained on the RAG env with its reward components."""
    assert ns["store"].search("Gustave Eiffel birthplace", k=1)[0].title == "Gustave Eiffel"
    assert (folder / "indexes" / "demo").is_dir()
    rows = metrics(folder / "runs" / "rag")
    assert [row["iteration"] for row in rows] == [1, 2]
    assert {"rewards/em/mean", "rewards/f1/mean", "rewards/mrr/mean", "rewards/format/mean"} <= set(rows[-1])


def check_serving(ns, folder):
    client = ns["client"]
    assert client.get("/health").json()["status"] == "ok"
    generated = client.post("/generate", json={"prompt": "What is 2 + 3?", "max_new_tokens": 4})
    assert generated.status_code == 200 and generated.json()["tokens"] <= 4
    assert client.post("/solve", json={"question": "What is 2 + 3?", "method": "maj", "budget": 2}).status_code == 200
    assert client.post("/solve", json={"question": "What is 2 + 3?", "method": "beam"}).status_code == 400


def check_search(ns, folder):
    rows = ns["rows"]
    assert [r["method"] for r in rows] == ["greedy", "maj@4", "best_of_4", "beam_2x2", "mcts_4"]
    assert all(r["problems"] == 4 and r["tokens_per_problem"] > 0 for r in rows)
    assert [row["iteration"] for row in metrics(folder / "runs" / "prm")][-1] == 3


def check_sft_dpo(ns, folder):
    assert len(metrics(folder / "runs" / "sft")) >= 2
    assert "reward_margin" in metrics(folder / "runs" / "dpo")[-1]


def check_reflection(ns, folder):
    assert set(ns["metrics"]) >= {"p1@t1", "m1@t3", "p1@t3"} and set(ns["pairs"]) == {"actor", "critic"}


def check_episodes(ns, folder):
    assert len(ns["trajectories"]) == 4 and not ns["engine"].live(ns["copies"])


# (page, a line its block contains) -> what the block must have done beyond running
CHECKS = {
    ("environments.md", 'register("Capitals-v0", Capitals)'): check_register_env,
    ("environments.md", "def has_marker(prompts, completions, **kwargs)"): check_reward_forms,
    ("environments.md", 'make("Dataset-v0", dataset=rows, reward_fns=[exact])'): check_dataset_env,
    ("environments.md", 'gymnasium.make("lmgym:lmgym/Arithmetic-v0", level=1)'): lambda ns, folder: None,
    ("policies-episodes.md", "engine.advance(copies, sample_key=2)"): check_episodes,
    ("algorithms.md", "class Reinforce(RLAlgorithm):"): check_subclass_trains,
    ("search-prm.md", "rows = evaluate_search(policy, env, methods, scorer=prm"): check_search,
    ("rag.md", 'make("RAG-HotpotQA-v0"'): check_rag,
    ("sft-dpo-reflection.md", "DPO(policy, pairs"): check_sft_dpo,
    ("sft-dpo-reflection.md", "evaluate_reflection(roles, env"): check_reflection,
    ("serving.md", "client = TestClient(app)"): check_serving,
}


def check_for(block):
    found = [check for (page, line), check in CHECKS.items() if block.path.name == page and line in block.code]
    assert len(found) == 1, f"{block.name}: give this runnable block one entry in CHECKS"
    return found[0]


@slow
@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_runnable_block_runs_and_does_what_its_page_says(block, reader):  # noqa: F811  (the fixture)
    namespace = run_block(block)
    check_for(block)(namespace, reader)


def test_every_check_finds_its_block():
    for page, line in CHECKS:
        assert sum(b.path.name == page and line in b.code for b in BLOCKS) == 1, (page, line)


def test_the_newcomers_tasks_have_runnable_blocks():
    pages = {block.path.name for block in BLOCKS}
    assert {"environments.md", "algorithms.md", "rag.md", "serving.md"} <= pages


def test_the_moved_page_lists_every_moved_module():
    page = (DOCS / "moved.md").read_text(encoding="utf-8")
    for old, new in MOVED.items():
        assert f"| `{old}` | `{new}` |" in page, old


def test_every_library_package_has_an_api_page():
    for package in LIBRARY:
        assert f"::: lmgym.{package}\n" in (DOCS / "api" / f"{package}.md").read_text(encoding="utf-8"), package
    assert set(LIBRARY) == {p.stem for p in (DOCS / "api").glob("*.md")}


def test_every_docs_page_is_in_the_site_nav():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in docs_pages():
        assert f": {page.relative_to(DOCS).as_posix()}\n" in config, page.name
