"""The walk's checks of installing, finding environments, gymnasium, TRL's habits and models (issue 27's first
half), run as user code in the user's folder against the installed wheel."""
from __future__ import annotations

import contextlib
import io
import runpy
import sys
from pathlib import Path
from typing import Any

from walkkit import (
    USER,
    Verdict,
    Walk,
    expectation,
    fails,
    last_lines,
    load_example,
    one_line,
    partly,
    untimed,
    vowel_env,
    working_dir,
    works,
)

# ---------------------------------------------------------------------------------------------------------------
# Install and find environments


@expectation("install", "`pip install dist/lmgym-*.whl` into a fresh venv: `import lmgym` and the `lmgym` command "
                        "work from the user's folder, both the venv's")
def wheel_install(walk: Walk) -> Verdict:
    import importlib.metadata
    import os

    import lmgym

    venv = Path(os.environ["WALK_VENV"]).resolve()
    where = Path(lmgym.__file__).resolve()
    if not where.is_relative_to(venv):
        return fails(f"lmgym imported from {where}, not from the venv {venv}")
    wheel = Path(os.environ["WALK_WHEEL"]).name
    installed = importlib.metadata.distribution("lmgym")
    if installed.version != wheel.split("-")[1]:
        return fails(f"installed lmgym {installed.version}, the wheel is {wheel}")
    command = walk.run([walk.lmgym_command(), "--version"])
    if command.returncode != 0 or command.stdout.strip() != f"lmgym {lmgym.__version__}":
        return fails(f"`lmgym --version`: exit {command.returncode}, {one_line(command.stdout or command.stderr)}")
    files = len(installed.files or [])
    return works(f"{wheel} in a fresh venv: lmgym from {where.parent.relative_to(venv)}, {files} files installed, "
                 f"`lmgym --version` prints lmgym {lmgym.__version__}")


@expectation("envs", "`lmgym.envs.make(id)` builds registered ids (plain and `lmgym/`), lists them, suggests on a typo")
def envs_make_ids(walk: Walk) -> Verdict:
    from lmgym.envs import make, registered_ids

    ids = registered_ids()
    env = make("Arithmetic-v0", level=1)
    obs, _ = env.reset(seed=0)
    make("lmgym/Arithmetic-v0")
    missing = [i for i in ("Arithmetic-v0", "GSM8K-v0", "MATH-v0", "HotpotQA-v0", "Dataset-v0") if i not in ids]
    if missing or not isinstance(obs, str):
        return fails(f"missing ids {missing} or non-text observation {type(obs).__name__}")
    try:
        make("Arithmetc-v0")
    except Exception as error:  # noqa: BLE001
        message = str(error)
        if "Arithmetic-v0" in message and "\n" not in message:
            return works(f"{len(ids)} ids; a typo is one line: {one_line(message, 120)}")
        return partly(f"typo refused without naming the close id: {one_line(message, 120)}")
    return fails("make('Arithmetc-v0') built something")


@expectation("gymnasium", "`gymnasium.make('lmgym:lmgym/...')` works (fresh process) and `check_env` passes")
def gymnasium_make(walk: Walk) -> Verdict:
    code = """
import gymnasium
try:
    gymnasium.make("lmgym/Arithmetic-v0")
    print("bare: ok")
except Exception as e:
    print("bare:", type(e).__name__)
env = gymnasium.make("lmgym:lmgym/Arithmetic-v0", level=1)
obs, info = env.reset(seed=0)
print("prefixed:", type(obs).__name__)
from lmgym import envs
from gymnasium.utils.env_checker import check_env
env = gymnasium.make("lmgym/ArithmeticStepwise-v0")
check_env(env.unwrapped, skip_render_check=True)
print("after import + check_env: ok")
"""
    proc = walk.run([sys.executable, "-c", code])
    if proc.returncode != 0:
        return fails(f"exit {proc.returncode}: {last_lines(proc.stderr)}")
    lines = dict(line.split(": ", 1) for line in proc.stdout.strip().splitlines() if ": " in line)
    if lines.get("prefixed") != "str" or "after import + check_env" not in lines:
        return fails(one_line(proc.stdout))
    bare = lines.get("bare")
    return works(f"'lmgym:lmgym/...' in a fresh process (beside the user's own envs/) and 'lmgym/...' after "
                 f"`import lmgym` both make envs, check_env passes; bare 'lmgym/...' before any import: {bare} "
                 "(gymnasium 1.x loads no plugins)")


@expectation("gymnasium", "`gymnasium.register_envs(lmgym)` works, as with ale_py")
def gymnasium_register_envs(walk: Walk) -> Verdict:
    import gymnasium

    import lmgym
    gymnasium.register_envs(lmgym)
    env = gymnasium.make("lmgym/Arithmetic-v0", level=0)
    obs, _ = env.reset(seed=1)
    if not isinstance(obs, str):
        return fails(f"observation is {type(obs).__name__}")
    return works("register_envs(lmgym) then gymnasium.make('lmgym/Arithmetic-v0') resets to a text prompt")


@expectation("gymnasium", "a gymnasium vector env (SyncVectorEnv of language envs) trains with the trainers, or is "
                          "refused in one line naming the alternative (what issue 27 allows)")
def gymnasium_vector_env(walk: Walk) -> Verdict:
    import gymnasium

    from lmgym.algorithms import GRPO
    from lmgym.envs import make

    vector = gymnasium.vector.SyncVectorEnv([lambda: make("Arithmetic-v0", level=0)] * 2)
    try:
        GRPO(walk.tiny_policy(), vector, walk.grpo_config(walk.tmp / "runs" / "vector")).train()
    except ValueError as error:
        message = str(error)
        if "\n" not in message and "pass the env itself" in message:
            return works("refused in one clear line naming the alternative (pass the env itself; the trainer "
                         "batches by branching one env), as issue 27 allows")
        return fails(f"ValueError: {one_line(message)}")
    except Exception as error:  # noqa: BLE001
        return fails(f"{type(error).__name__}: {one_line(error)}")
    return works("GRPO trained on a SyncVectorEnv")


@expectation("gymnasium", "gymnasium wrappers (TimeLimit, TransformReward) work with the trainers")
def gymnasium_wrappers(walk: Walk) -> Verdict:
    import gymnasium

    from lmgym.algorithms import GRPO
    from lmgym.envs import make

    inner = make("Dataset-v0", dataset=[{"prompt": "Say hi."}, {"prompt": "Say bye."}],
                 reward_fns=[lambda completions, **kw: [1.0] * len(completions)])
    env = gymnasium.wrappers.TransformReward(gymnasium.wrappers.TimeLimit(inner, max_episode_steps=4),
                                             lambda r: 2.0 * r)
    rows = GRPO(walk.tiny_policy(), env, walk.grpo_config(walk.tmp / "runs" / "wrapped")).train()
    mean = rows[-1]["reward_mean"]
    if mean != 2.0:
        return fails(f"trained, but the wrapper's reward was not used (reward_mean {mean}, expected 2.0)")
    return works("GRPO trained through TimeLimit + TransformReward and used the wrapped reward (2.0)")


# ---------------------------------------------------------------------------------------------------------------
# Envs, rewards, prompts


@expectation("envs", "the README's new-environment block (LanguageEnv subclass + register) runs as shown")
def readme_new_env_block(walk: Walk) -> Verdict:
    script = USER / "capitals_env.py"  # the block, pasted from docs/environments.md
    code = script.read_text(encoding="utf-8")
    with working_dir(walk.tmp / "blocks" / "env"), contextlib.redirect_stdout(io.StringIO()) as out:
        namespace = runpy.run_path(str(script), run_name="__main__")
    if namespace.get("reward") != 1.0 or not namespace.get("terminated"):
        return fails(f"ran, but reward {namespace.get('reward')} terminated {namespace.get('terminated')}")
    lines = len([line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")])
    return works(f"the block ({lines} lines) runs verbatim; prints {one_line(out.getvalue(), 80)}")


@expectation("envs",
             "a custom per-sample reward function `fn(completion, gold, info)` plugs into make(..., reward_fns)")
def custom_reward_fn(walk: Walk) -> Verdict:
    from lmgym.envs import make

    def brevity(completion, gold, info):
        return 1.0 if len(completion) < 20 else 0.25

    env = make("Arithmetic-v0", level=1, reward_fns={"brevity": brevity})
    obs, info = env.reset(seed=0)
    _, reward, terminated, _, info = env.step(f"#### {info['gold']}")
    components = info.get("reward_components", {})
    if reward != 1.0 or components.get("brevity") != 1.0 or not terminated:
        return fails(f"reward {reward}, components {components}")
    return works("reward_fns={'brevity': fn} scores the step; the component is reported in info['reward_components']")


@expectation("envs", "chat-format prompts (lists of messages) work at reset and in sampling, with the chat template")
def chat_prompts(walk: Walk) -> Verdict:
    from lmgym.envs import make

    messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2+2?"}]
    env = make("Dataset-v0", dataset=[{"prompt": messages, "answer": "4"}],
               reward_fns=[lambda completions, answer, **kw: [float(c[0]["content"].strip() == a)
                                                               for c, a in zip(completions, answer)]])
    obs, _ = env.reset(seed=0)
    if obs != messages:
        return fails(f"reset returned {type(obs).__name__}, not the messages")
    policy = walk.tiny_policy()
    ids = policy.format_prompt(obs)
    expected = policy.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    expected = expected["input_ids"] if hasattr(expected, "keys") else list(expected)
    if list(ids) != list(expected):
        return partly("reset gives messages, but format_prompt differs from tokenizer.apply_chat_template(messages)")
    generations = policy.sample([ids], n=2, max_new_tokens=4)[0]
    texts = policy.generate_text([obs], max_new_tokens=4)
    _, reward, *_ = env.step("4")
    if len(generations) != 2 or len(texts) != 1 or reward != 1.0:
        return fails(f"{len(generations)} samples, {len(texts)} texts, reward {reward}")
    return works("reset returns the messages; format_prompt equals apply_chat_template(messages, "
                 "add_generation_prompt=True); sample and generate_text take them; step scores 1.0")


@expectation("envs", "a `datasets.Dataset` with a 'prompt' column is an env in one call and GRPO trains on it",
             group="trl_run")
def dataset_env(walk: Walk) -> Verdict:
    run = walk.trl_run
    if len(run["rows"]) != 2 or not run["changed"]:
        return fails(f"{len(run['rows'])} rows logged, weights changed: {run['changed']}")
    return works("make('Dataset-v0', dataset=Dataset.from_list(rows), reward_fns=[fn]): GRPO ran 2 iterations and "
                 "moved the weights")


@expectation("trl",
             "TRL-style rewards `fn(prompts, completions, **kw)` are called once per batch, extra columns as lists",
             group="trl_run")
def trl_reward_batched(walk: Walk) -> Verdict:
    calls = walk.trl_run["calls"]
    training = [c for c in calls if len(c["completions"]) == 6]  # 2 prompts x 3 samples
    if len(training) != 2:
        return fails(f"calls per training iteration: {[len(c['completions']) for c in calls]}")
    if not all(len(c["topic"]) == 6 == len(c["prompts"]) for c in training):
        return fails("extra column or prompts not one per completion")
    return works("one call per iteration with 6 completions (2 prompts x 3), prompts and the 'topic' column as "
                 "lists; env.step alone and wrapped envs call it per episode (documented)")


@expectation("trl", "a TRL reward that takes `completion_ids` gets each completion's sampled token ids",
             group="trl_run")
def trl_reward_completion_ids(walk: Walk) -> Verdict:
    run = walk.trl_run
    training = [c for c in run["calls"] if len(c["completions"]) == 6]
    if not training:
        return fails("no batched call to inspect")
    tokenizer = run["policy"].tokenizer
    ids = [i for c in training for i in c["completion_ids"]]
    texts = [c for call in training for c in call["completions"]]
    if not all(isinstance(x, list) and x and all(isinstance(t, int) for t in x) for x in ids):
        return fails("completion_ids are not non-empty lists of ints")

    def text_of(completion):
        return completion[0]["content"] if isinstance(completion, list) else completion

    same = sum(tokenizer.decode(x, skip_special_tokens=True).strip() == str(text_of(t)).strip()
               for x, t in zip(ids, texts))
    if same < len(ids):
        return partly(f"ids given, but only {same}/{len(ids)} decode to their completion's text")
    return works(f"{len(ids)} completion_ids, each decoding to its completion's text")


@expectation("trl", "TRL's GRPOConfig names (per_device_train_batch_size, gradient_accumulation_steps, num_iterations, "
             "max_completion_length, num_generations, beta) work in YAML and as flags with TRL's meaning")
def trl_config_names(walk: Walk) -> Verdict:
    from lmgym.algorithms import GRPOConfig
    from lmgym.training.cli import config_from_arguments

    quickstart = load_example("quickstart")
    yaml = walk.tmp / "trl.yaml"
    yaml.write_text("per_device_train_batch_size: 4\ngradient_accumulation_steps: 2\nnum_iterations: 2\n"
                    "max_completion_length: 48\n")
    args = quickstart.build_parser().parse_args(["--config", str(yaml), "--num_generations", "4", "--beta", "0.02",
                                                 "--output_dir", str(walk.tmp / "runs" / "trl-names")])
    config = config_from_arguments(GRPOConfig, args, quickstart.PRESETS["cpu"])
    got = (config.micro_batch_size, config.minibatch_size, config.update_epochs, config.max_new_tokens,
           config.samples_per_prompt, config.kl_coeff)
    want = (4, 8, 2, 48, 4, 0.02)
    if got != want:
        return fails(f"(micro, minibatch, epochs, max_new_tokens, samples, kl) = {got}, expected {want}")
    in_python = GRPOConfig.from_trl(per_device_train_batch_size=4, gradient_accumulation_steps=2, num_iterations=2,
                                    max_completion_length=48, num_generations=4, beta=0.02,
                                    output_dir=str(walk.tmp / "runs" / "trl-names"))
    if (in_python.micro_batch_size, in_python.minibatch_size) != (4, 8):
        return fails("GRPOConfig.from_trl maps the batch names differently from the flags")
    try:
        GRPOConfig(num_generations=4, output_dir=str(walk.tmp / "runs" / "trl-names"))
        direct = "the constructor takes them too"
    except Exception as error:  # noqa: BLE001
        direct = (f"GRPOConfig(num_generations=4) itself is refused in one line ({type(error).__name__}) "
                  "naming from_trl" if "from_trl" in str(error)
                  else f"GRPOConfig(num_generations=4): {one_line(error, 80)}")
    return works(f"YAML + flags map all six (minibatch = G x micro x ranks = 8), as does GRPOConfig.from_trl; {direct}")


# ---------------------------------------------------------------------------------------------------------------
# Models and policies


@expectation("models",
             "HFPolicy wraps any causal LM (a folder path, or a model + tokenizer) and samples from text prompts")
def hfpolicy_any_causal_lm(walk: Walk) -> Verdict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lmgym.policies import HFPolicy

    by_path = HFPolicy(str(walk.tiny_dir), device="cpu")
    by_object = HFPolicy(AutoModelForCausalLM.from_pretrained(walk.tiny_dir),
                         AutoTokenizer.from_pretrained(walk.tiny_dir), device="cpu")
    for policy in (by_path, by_object):
        g = policy.sample([policy.format_prompt("What is 2 + 3?")], n=2, max_new_tokens=4)[0]
        if len(g) != 2 or len(g[0].logprobs) != len(g[0].completion_ids) or not isinstance(g[0].text, str):
            return fails("sample did not give n generations with ids, logprobs and text")
        if not isinstance(policy.generate_text(["What is 2 + 3?"], max_new_tokens=4)[0], str):
            return fails("generate_text gave no text")
    try:
        by_path.sample(["What is 2 + 3?"], n=2, max_new_tokens=4)
    except Exception as error:  # noqa: BLE001
        return partly(f"both load; generate_text(['text']) works, but sample(['text'], n=2) (the documented "
                      f"`sample(prompts, n, ...)`) raises {type(error).__name__}: {one_line(error, 60)}; it takes "
                      "token ids (format_prompt first), which the docs do not say")
    return works("HFPolicy(path) and HFPolicy(model, tokenizer) sample text prompts (n=2: ids, logprobs, text)")


@expectation("models", "LoRA the peft way: a `peft.LoraConfig` (or a peft-wrapped model) trains adapters only")
def lora_peft_config(walk: Walk) -> Verdict:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lmgym.algorithms import GRPO
    from lmgym.policies import HFPolicy

    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    try:
        HFPolicy(str(walk.tiny_dir), device="cpu", lora=config)
        direct = "lora=LoraConfig(...) accepted"
    except Exception as error:  # noqa: BLE001
        direct = f"lora=LoraConfig(...) refused: {type(error).__name__}: {one_line(error, 90)}"
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(walk.tiny_dir), config)
    policy = HFPolicy(model, AutoTokenizer.from_pretrained(walk.tiny_dir), device="cpu")
    frozen = {n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_" not in n}
    adapters = {n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_B" in n}
    GRPO(policy, vowel_env(), walk.grpo_config(walk.tmp / "runs" / "peft", learning_rate=5e-2)).train()
    params = dict(policy.model.named_parameters())
    base_moved = [n for n, p in frozen.items() if not bool((params[n] == p).all())]
    adapter_moved = any(not bool((params[n] == p).all()) for n, p in adapters.items())
    if base_moved or not adapter_moved:
        return fails(f"peft-wrapped model: base moved {base_moved[:2]}, adapters moved {adapter_moved}")
    if direct.endswith("accepted"):
        return works("lora=LoraConfig(...) accepted, and a get_peft_model(...) model trains its adapters only")
    return partly(f"a get_peft_model(...) model trains its adapters only, but {direct} (LoraSettings is the "
                  "toolkit's own)")


@expectation("models", "the docs' new-algorithm block (RLAlgorithm subclass with advantages + loss) runs as shown")
def readme_new_algorithm_block(walk: Walk) -> Verdict:
    from lmgym import policies
    script = USER / "reinforce_algorithm.py"  # the block, pasted from docs/algorithms.md
    code = script.read_text(encoding="utf-8")
    tiny = walk.tiny_policy()
    real = policies.HFPolicy

    def hf_policy(*args, **kwargs):  # HFPolicy() -> the tiny model: the embedded one trains ~1 min here
        return tiny if not args and not kwargs else real(*args, **kwargs)

    namespace: dict[str, Any] = {}
    policies.HFPolicy = hf_policy
    try:
        with working_dir(walk.tmp / "blocks" / "algo"), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            namespace = runpy.run_path(str(script), run_name="__main__")
    finally:
        policies.HFPolicy = real
    rows = namespace.get("rows") or []
    if len(rows) < 3 or "loss_policy" not in rows[-1]:
        return fails(f"ran, but {len(rows)} rows, keys {sorted(rows[-1]) if rows else []}")
    lines = len([line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")])
    return works(f"the block ({lines} lines) runs verbatim (HFPolicy() given the tiny model here for time) and logs "
                 "loss_policy each iteration")


@expectation("models", "a fixed seed repeats a run exactly (same metrics, same weights) on the CPU")
def seeded_runs_repeat(walk: Walk) -> Verdict:
    from lmgym.algorithms import GRPO

    results = []
    for name in ("seed-a", "seed-b"):
        policy = walk.tiny_policy()
        rows = GRPO(policy, vowel_env(), walk.grpo_config(walk.tmp / "runs" / name, train_iterations=2,
                                                          seed=7)).train()
        results.append(([untimed(r) for r in rows], [p.detach().clone() for p in policy.model.parameters()]))
    (rows_a, weights_a), (rows_b, weights_b) = results
    if rows_a != rows_b:
        return fails("same seed, different metrics")
    if not all(bool((a == b).all()) for a, b in zip(weights_a, weights_b)):
        return fails("same seed and metrics, different weights")
    return works("two runs with seed=7 give identical metrics rows and bit-identical weights")


