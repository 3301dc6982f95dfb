"""Search failures during training are not silent: GRPO on RAG-HotpotQA-v0 over a store whose every search
fails counts them in each iteration's and evaluation's metrics (metrics.jsonl) and warns once a run."""
from __future__ import annotations

import json

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.buffers import Trajectory
from lmgym.envs import RAGHotpotQAEnv
from lmgym.evaluation.episode_metrics import ToolErrorCounter, count_tool_errors
from lmgym.policies.decoding.generation import Generation
from tests.rag_toys import RECORDS, ToyStore
from tests.tiers import slow


class SearchThenAnswer:
    """The tiny policy, made to search on its first turn and answer on the next (its weights still train)."""

    def __init__(self, policy):
        self.policy = policy

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        out = []
        for prompt in prompts:
            searched = "<result>" in self.policy.tokenizer.decode(prompt)
            text = "<answer>Dijon</answer>" if searched else "<search>Dijon</search>"
            ids = self.policy.encode_text(text)
            out.append([Generation(list(prompt), ids, [-1.0] * len(ids), text, "stop") for _ in range(n)])
        return out


@slow
def test_failing_searches_are_counted_per_iteration_and_evaluation_and_warned_once(tiny_policy, tmp_path, capsys):
    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(fail=True), k=1, max_searches=1)
    eval_env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(fail=True), k=1, max_searches=1)
    config = GRPOConfig(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=16,
                        eval_episodes=2, eval_at_start=True, output_dir=str(tmp_path / "run"), progress=False,
                        learning_rate=1e-3, micro_batch_size=4)
    GRPO(SearchThenAnswer(tiny_policy), env, config, eval_env=eval_env).train()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["iteration"], r.get("tool_errors"), r.get("tool_error_rate")) for r in rows] == [
        (0, None, None), (1, 4, 1.0), (2, 4, 1.0)]  # 2 prompts x 2 samples, one (failed) search each
    assert [(r.get("eval_tool_errors"), r.get("eval_tool_error_rate")) for r in rows] == [
        (2, 1.0), (None, None), (2, 1.0)]  # evaluated before training and after the last iteration
    warnings = [line for line in capsys.readouterr().err.splitlines() if "tool call(s) failed" in line]
    assert warnings == ["warning: evaluation: 2 tool call(s) failed (the model saw an error result); first: search: "
                        "ConnectionError: index is gone. Counted as tool_errors in metrics.jsonl; this warning is "
                        "not repeated in this run"]


def episode(info: dict) -> Trajectory:
    return Trajectory(prompt_ids=[1], completion_ids=[2], logprobs=[0.0], completion_mask=[1],
                      reward=0.0, info=info)


def test_tool_error_metrics_count_failed_calls_over_all_calls_and_only_for_envs_with_tools():
    assert count_tool_errors([episode({"correct": True})]) == ({}, None)  # an env without tools: no metric
    episodes = [episode({"tool_calls": {"search": 2}, "tool_errors": [{"tool": "search", "error": "OSError: gone"}]}),
                episode({"tool_calls": {"search": 1}, "tool_errors": []}),
                episode({"tool_calls": {}, "tool_errors": []})]
    assert count_tool_errors(episodes) == ({"tool_errors": 1, "tool_error_rate": 1 / 3}, "search: OSError: gone")
    counter = ToolErrorCounter()
    assert counter.metrics(episodes[1:], "iteration 1") == {"tool_errors": 0, "tool_error_rate": 0.0}
    assert not counter.warned
    counter.metrics(episodes, "iteration 2")
    counter.metrics(episodes, "iteration 3")
    assert counter.warned
