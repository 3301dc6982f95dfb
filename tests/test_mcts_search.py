"""MCTSSearch: step advantages are the tree's Q differences (a scripted tree), sibling steps become PRM
pairs, training runs on the tiny model (rollouts; a PRM that learns from the pairs), config errors; the
tree search's settings nest (`mcts: {simulations: 24}`, `--mcts.simulations 24`), old flat names refused."""
import argparse

import pytest
import torch

from examples.common import example_parser
from lmgym.algorithms import MCTSSearch, MCTSSearchConfig
from lmgym.algorithms.mcts_search import STEP_ADVANTAGES
from lmgym.buffers import ADVANTAGES
from lmgym.buffers.step_pairs import StepPair
from lmgym.envs import make
from lmgym.search.mcts import MCTSConfig
from lmgym.training import ConfigError, add_config_arguments, config_from_arguments, load_config
from tests.mcts_toys import SCORES, ScriptedPolicy, SevenEnv, TableScorer
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

# the scripted tree fully expanded (12 simulations, k=3): Q(root) = mean of all 12 scores
Q_ROOT = sum(SCORES.values()) / 12
Q_FIRST = {"x = 1\n": (0.7 + 0.1 + 0.2 + 0.1) / 4, "y = 2\n": (0.5 + 0.95 + 0.3 + 0.3) / 4,
           "z = 3\n": (0.3 + 3 * 0.05) / 4}


def config(tmp_path, mcts: dict | None = None, **overrides):
    values = dict(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=4,
                  mcts={"simulations": 6, "expand_k": 2, "wave_size": 2, **(mcts or {})},
                  output_dir=str(tmp_path / "run"), progress=False, micro_batch_size=8, learning_rate=1e-2,
                  eval_at_start=False, eval_episodes=2)
    values.update(overrides)
    return MCTSSearchConfig(**values)


@slow
def test_step_advantages_are_the_q_differences_of_a_scripted_tree(tmp_path):
    c = config(tmp_path, prompts_per_iteration=1, samples_per_prompt=9, pair_margin=0.3, max_new_tokens=8,
               mcts=dict(simulations=12, expand_k=3, wave_size=3, evaluation="prm"))
    algo = MCTSSearch(ScriptedPolicy(), SevenEnv(), c, prm=TableScorer())
    trajectories = algo.collect()
    assert len(trajectories) == 9 and len({t.group_id for t in trajectories}) == 1
    assert Q_ROOT == pytest.approx(0.3)
    for t in trajectories:
        first, second = t.info["steps"]
        a1, a2 = Q_FIRST[first] - Q_ROOT, SCORES[second] - Q_FIRST[first]  # Q(node) - Q(parent), per step
        assert STEP_ADVANTAGES.get(t) == pytest.approx([a1] * len(first) + [a2] * len(second))
    by_text = {t.text: STEP_ADVANTAGES.get(t) for t in trajectories}
    assert by_text["y = 2\n#### 7\n"] == pytest.approx([0.2125] * 6 + [0.4375] * 7)  # 0.5125 - 0.3, 0.95 - 0.5125
    algo.prepare(trajectories)  # every token sampled (mask 1); by default the raw Q differences
    assert all(ADVANTAGES.get(t) == pytest.approx(STEP_ADVANTAGES.get(t)) for t in trajectories)
    algo.config.advantage_scaling = "rms"  # divided by the batch's root mean square
    algo.prepare(trajectories)
    steps = [v for t in trajectories for v in STEP_ADVANTAGES.get(t)]
    rms = (sum(v * v for v in steps) / len(steps)) ** 0.5
    assert 0.1 < rms < 0.3  # PRM-value sized, a fraction of GRPO's unit-scale advantages
    for t in trajectories:
        assert ADVANTAGES.get(t) == pytest.approx([v / rms for v in STEP_ADVANTAGES.get(t)], rel=1e-5)
    assert float(algo._step_metrics["step_advantage_rms"][-1]) == pytest.approx(rms, rel=1e-5)
    for scaling, expected in (("none", lambda v: v), ("whiten", None)):
        algo.config.advantage_scaling = scaling
        algo.prepare(trajectories)
        if expected is not None:  # the raw Q differences
            assert all(ADVANTAGES.get(t) == pytest.approx(STEP_ADVANTAGES.get(t)) for t in trajectories)
        else:  # PPO's: zero mean, unit std over the tokens
            whitened = [v for t in trajectories for v in ADVANTAGES.get(t)]
            assert sum(whitened) / len(whitened) == pytest.approx(0.0, abs=1e-5)
            assert sum(v * v for v in whitened) / len(whitened) == pytest.approx(1.0, rel=1e-4)
    problem = trajectories[0].info["problem_id"]
    question = f"Problem {problem}\n"  # the reset observation, verbatim
    # siblings whose Q differ by >= 0.3: y over z (0.4), and under y "#### 7" over "#### 8" and "#### 9" (0.65)
    assert [(p.question, p.prefix, p.chosen, p.rejected, p.source, p.problem_id) for p in algo.step_pairs] == [
        (question, (), "y = 2\n", "z = 3\n", "mcts", problem),
        (question, ("y = 2\n",), "#### 7\n", "#### 8\n", "mcts", problem),
        (question, ("y = 2\n",), "#### 7\n", "#### 9\n", "mcts", problem)]
    assert [p.margin for p in algo.step_pairs] == pytest.approx([0.4, 0.65, 0.65])
    assert all(isinstance(p, StepPair) for p in algo.step_pairs)


@slow
def test_two_iterations_on_the_tiny_model_with_rollouts_train_the_policy(tiny_policy, tmp_path):
    algo = MCTSSearch(tiny_policy, make("ToyDigits-v0", mode="stepwise", max_steps=2), config(tmp_path))
    before = [p.detach().clone() for p in tiny_policy.parameters()]
    rows = algo.train()
    assert [r["iteration"] for r in rows] == [1, 2]
    for key in ("search_tokens", "search_tokens_per_second", "tree_nodes", "finished_leaves", "step_pairs",
                "loss_policy", "clip_fraction", "reward_mean"):
        assert key in rows[-1], key
    assert rows[-1]["tree_nodes"] == 7  # the root, 2 children, then 2 leaves by 2: 6 simulations
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_policy.parameters()))
    trained = list(algo.buffer)  # the last iteration's episodes
    assert trained and all(ADVANTAGES.has(t) for t in trained)
    assert any(abs(v) > 1e-6 for t in trained for v in ADVANTAGES.get(t))


@slow
def test_the_prm_learns_from_the_trees_sibling_pairs(tiny_policy, tmp_path):
    from lmgym.policies.prm import ProcessRewardModel

    prm = ProcessRewardModel.from_policy(tiny_policy)
    c = config(tmp_path, train_iterations=1, prm_updates=2, pair_margin=1e-6, prm_learning_rate=1e-2)
    algo = MCTSSearch(tiny_policy, make("ToyDigits-v0", mode="stepwise", max_steps=2), c, prm=prm)
    before = [p.detach().clone() for p in prm.parameters()]
    (row,) = algo.train()
    assert algo.step_pairs and all(p.source == "mcts" and p.margin >= 1e-6 for p in algo.step_pairs)
    assert row["prm_bt_loss"] > 0 and 0 <= row["prm_pair_accuracy"] <= 1
    assert any(not torch.equal(a, b) for a, b in zip(before, prm.parameters()))
    assert set(algo.extra_state()) == {"prm", "prm_optimizer"}
    scored = MCTSSearch(tiny_policy, algo.env, config(tmp_path, mcts=dict(evaluation="prm")), prm=prm)
    trajectories = scored.collect()  # the PRM, a StepScorer, evaluates the new steps
    assert trajectories and all(STEP_ADVANTAGES.has(t) for t in trajectories)


def test_bad_settings_are_one_line_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"^MCTSSearchConfig.mcts.expand_k must be a positive integer, got 0$"):
        config(tmp_path, mcts=dict(expand_k=0))
    with pytest.raises(ConfigError, match=r"^MCTSSearchConfig.mcts.selection must be one of puct, ucb1, got 'x'$"):
        config(tmp_path, mcts=dict(selection="x"))
    with pytest.raises(ConfigError, match=r"^MCTSSearchConfig.temperature must be > 0"):
        config(tmp_path, temperature=0)
    with pytest.raises(ConfigError, match=r"^MCTSSearchConfig.advantage_scaling must be one of rms, whiten, none, "
                                          r"got 'std'$"):
        config(tmp_path, advantage_scaling="std")
    with pytest.raises(ConfigError, match=r"^MCTSSearchConfig.pair_margin must be > 0, got 0.0$"):
        config(tmp_path, pair_margin=0)
    env = SevenEnv()
    with pytest.raises(ConfigError, match=r"^MCTSSearchConfig.mcts.evaluation is 'prm', but no PRM is given"):
        MCTSSearch(ScriptedPolicy(), env, config(tmp_path, mcts=dict(evaluation="prm")))
    with pytest.raises(ConfigError, match=r"^MCTSSearchConfig.prm_updates is 2, but no PRM is given"):
        MCTSSearch(ScriptedPolicy(), env, config(tmp_path, prm_updates=2))


# --- the tree search's settings: one nested MCTSConfig, set by mapping, YAML, dotted flags --------------

def flags(argv: list[str], defaults: dict | None = None) -> MCTSSearchConfig:
    parser = example_parser(prog="search")
    add_config_arguments(parser, MCTSSearchConfig, defaults)
    return config_from_arguments(MCTSSearchConfig, parser.parse_args(argv), defaults)


def test_the_search_settings_nest_and_a_mapping_changes_only_the_fields_it_names():
    assert MCTSSearchConfig().mcts == MCTSConfig(evaluation="rollout")  # training's default evaluation
    c = MCTSSearchConfig(mcts={"simulations": "24"}, temperature=0.5, max_new_tokens=12)
    assert c.mcts == MCTSConfig(simulations=24, evaluation="rollout")  # coerced, the rest left as it was
    assert c.mcts_config() == MCTSConfig(simulations=24, evaluation="rollout", temperature=0.5, max_new_tokens=12)
    assert MCTSSearchConfig(**c.to_dict()) == c and "temperature" not in c.to_dict()["mcts"]


def test_nested_yaml_and_dotted_flags_set_the_mcts_fields(tmp_path):
    path = tmp_path / "mcts.yaml"
    path.write_text("temperature: 0.7\nmcts:\n  simulations: 24\n  expand_k: 3\n  answer: vote\n")
    c = load_config(MCTSSearchConfig, path, {"mcts.expand_k": 5})  # an override changes one nested field
    assert (c.mcts.simulations, c.mcts.expand_k, c.mcts.answer, c.mcts.evaluation) == (24, 5, "vote", "rollout")
    assert c.mcts_config().temperature == 0.7
    c = flags(["--config", str(path), "--mcts.simulations", "40", "--mcts.selection", "ucb1"],
              defaults={"mcts": {"wave_size": 2}})  # script defaults < file < flags
    assert (c.mcts.simulations, c.mcts.expand_k, c.mcts.selection, c.mcts.wave_size) == (40, 3, "ucb1", 2)
    assert flags(["--mcts.max_tokens", "900"]).mcts.max_tokens == 900


def test_bad_nested_values_are_one_line_errors_naming_the_dotted_field_and_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    for text, problem in [("mcts:\n  simulations: 0\n",
                           "MCTSSearchConfig.mcts.simulations must be a positive integer, got 0"),
                          ("mcts:\n  simulations: many\n",
                           "MCTSSearchConfig.mcts.simulations expects an integer, got 'many'"),
                          ("mcts:\n  simulatons: 4\n",
                           "unknown MCTSSearchConfig field(s): mcts.simulatons (did you mean mcts.simulations?)"),
                          ("mcts: 4\n", "MCTSSearchConfig.mcts expects a mapping of MCTSConfig fields, got 4")]:
        path.write_text(text)
        assert one_line(load_config, MCTSSearchConfig, path) == f"{path}: {problem}"
    assert one_line(flags, ["--mcts.wave_size", "0"]) == (
        "MCTSSearchConfig.mcts.wave_size must be a positive integer, got 0")
    assert one_line(MCTSSearchConfig, mcts={"simulatons": 4}) == (
        "MCTSSearchConfig.mcts: unknown MCTSConfig field(s): simulatons (did you mean simulations?)")


def test_an_unknown_dotted_flag_is_one_argparse_line(capsys):
    with pytest.raises(SystemExit):
        flags(["--mcts.simulatons", "4"])
    assert capsys.readouterr().err.strip().splitlines() == [
        "search: error: unknown flag --mcts.simulatons (did you mean --mcts.simulations?)"]


@pytest.mark.parametrize("name", ["simulations", "expand_k", "wave_size", "selection", "exploration", "evaluation",
                                  "max_depth", "max_tokens"])
def test_the_old_flat_names_are_refused_naming_the_dotted_spelling(name, tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(f"mcts_{name}: 4\n")
    messages = [one_line(MCTSSearchConfig, **{f"mcts_{name}": 4}), one_line(load_config, MCTSSearchConfig, path),
                one_line(flags, [f"--mcts_{name}", "4"])]
    assert messages[1].startswith(f"{path}: ")
    expected = f"MCTSSearchConfig: mcts_{name} is now mcts.{name} (YAML: `mcts: {{{name}: ...}}`; flag: --mcts.{name}"
    assert all(expected in message for message in messages), messages


def test_the_sampling_the_search_takes_from_the_outer_config_cannot_be_set_on_mcts(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("mcts: {temperature: 0.3}\n")
    expected = ("MCTSSearchConfig: mcts.temperature is not read: mcts takes this config's own temperature; "
                "set temperature")
    assert one_line(load_config, MCTSSearchConfig, path) == f"{path}: {expected}"
    assert one_line(MCTSSearchConfig, mcts={"temperature": 0.3}) == expected
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, MCTSSearchConfig)
    assert "--mcts.temperature" not in parser.format_help() and "--mcts.max_new_tokens" not in parser.format_help()


def one_line(call, *args, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        call(*args, **kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_gradient_checkpointing_reaches_a_prm_trained_online(tiny_policy, tmp_path):
    from lmgym.policies.padded_passes import checkpointed_layers
    from lmgym.policies.prm import ProcessRewardModel

    env = make("ToyDigits-v0", mode="stepwise", max_steps=2)
    prms = {updates: ProcessRewardModel.from_policy(tiny_policy) for updates in (2, 0)}  # before the policy is
    assert checkpointed_layers(tiny_policy.model) == 0  # checkpointed: copies of its backbone start without it
    for updates, expected in ((2, True), (0, False)):
        prm = prms[updates]
        c = config(tmp_path, train_iterations=1, prm_updates=updates, gradient_checkpointing=True)
        MCTSSearch(tiny_policy, env, c, prm=prm)
        assert (checkpointed_layers(prm.backbone) > 0) == expected
