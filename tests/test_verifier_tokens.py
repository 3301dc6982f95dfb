"""The tokens a generative verifier writes: `CriticVerifier.tokens_generated` counts every token the scripted
critic generated (checks in mode verdict, votes in mode votes; the teacher-forced verdict pass is not counted),
and `evaluate_search` / `evaluate_curves` report it per problem on the rows whose scorer counts, with the
tables' optional "verifier tokens/problem" column."""
import pytest

from lmgym.algorithms.prm.critic_verifier import CriticVerifier, CriticVerifierConfig
from lmgym.evaluation.curves import curves_table, evaluate_curves
from lmgym.evaluation.search_eval import evaluate_search, markdown_table
from lmgym.search import SearchSettings
from tests.search_toys import ScriptedPolicy, ScriptedScorer
from tests.test_critic_verifier import CRITIC, ScriptedCritic, critic_env, stepwise_env


class EosCritic(ScriptedCritic):
    """The scripted critic, each generation that stops before its cap ending with end-of-sequence as a real
    model's does: one more token id than its text has characters (the text skips it)."""

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        rows = super().sample(prompts, n, max_new_tokens, temperature, top_p, stop, generator)
        for row in rows:
            for g in row:
                if len(g.completion_ids) < max_new_tokens:
                    g.completion_ids.append(self.tokenizer.eos_token_id)
                    g.logprobs.append(0.0)
        return rows


def generated(critic, text: str, cap: int) -> int:
    """Token ids the EosCritic generates for `text` under `cap`: the text's tokens, cut at the cap, plus EOS
    when it stopped before it."""
    ids = len(critic.encode_text(text))
    return cap if ids >= cap else ids + 1


def test_the_verdict_mode_counts_the_checks_it_generated_and_not_the_verdict_pass():
    critic = EosCritic()
    verifier = CriticVerifier(critic, critic_env(), CriticVerifierConfig(batch_size=1))
    assert verifier.tokens_generated == 0
    prompt = critic_env().build_prompt(critic_env().get_problem(0))
    check = {answer: generated(critic, CRITIC[answer]["check"], 96) for answer in CRITIC}
    assert check["#### 7"] == len(CRITIC["#### 7"]["check"]) + 1  # the EOS id counts, though the text lacks it
    scores = verifier.score([prompt, prompt], ["#### 7", "#### 5"])
    assert scores == pytest.approx([0.7, 0.4])  # scores as without EOS
    assert verifier.tokens_generated == check["#### 7"] + check["#### 5"]
    assert len(critic.contexts) == 8  # four verdict words read per solution: forward passes, not counted
    verifier.score([prompt], ["#### 5"])  # a running count
    assert verifier.tokens_generated == check["#### 7"] + 2 * check["#### 5"]
    short = CriticVerifier(EosCritic(), critic_env(), CriticVerifierConfig(work_tokens=10))
    short.score([prompt, prompt], ["#### 7", "#### 5"])
    assert short.tokens_generated == 2 * 10  # checks cut at work_tokens


def test_the_votes_mode_counts_every_vote():
    critic = EosCritic()
    verifier = CriticVerifier(critic, critic_env(), CriticVerifierConfig(mode="votes", votes=4, work_tokens=30,
                                                                         batch_size=1))
    prompt = critic_env().build_prompt(critic_env().get_problem(0))
    assert verifier.score([prompt, prompt], ["#### 7", "#### 5"]) == pytest.approx([3 / 4, 2 / 4])
    sevens, fives = CRITIC["#### 7"]["votes"], CRITIC["#### 5"]["votes"]
    expected = sum(generated(critic, v, 30) for v in sevens) + 2 * sum(generated(critic, v, 30) for v in fives)
    assert any(len(v) >= 30 for v in fives) and any(len(v) < 30 for v in sevens)  # cut and uncut votes
    assert verifier.tokens_generated == expected


def critic_and_scorers():
    critic = CriticVerifier(EosCritic(), critic_env())
    return critic, {"default": ScriptedScorer({}), "critic": critic}


def test_search_rows_report_the_critics_tokens_per_problem_only_where_it_scored():
    """Every problem samples 5, 7, 5: the critic checks each of them once per method that uses it."""
    critic, scorers = critic_and_scorers()
    policy = ScriptedPolicy({"": ["#### 5\n", "#### 7\n", "#### 5\n"]})
    methods = [SearchSettings(method="maj", n=3), SearchSettings(method="best_of_n", n=3),
               SearchSettings(method="weighted_maj", n=3, verifier="critic", aggregation="last"),
               SearchSettings(method="best_of_n", n=3, verifier="critic", aggregation="last")]
    rows = evaluate_search(policy, stepwise_env(), methods, scorers, episodes=2, batch_problems=1,
                           baseline="maj@3")
    per_problem = 2 * generated(critic.critic, CRITIC["#### 5"]["check"], 96) + \
        generated(critic.critic, CRITIC["#### 7"]["check"], 96)
    assert [r.get("verifier_tokens_per_problem") for r in rows] == [None, None, per_problem, per_problem]
    assert critic.tokens_generated == 2 * 2 * per_problem  # two methods, two problems
    assert all(r["tokens_per_problem"] == 3 * len("#### 5\n") for r in rows)  # the policy's own, as before
    header, _, maj, best, weighted, best_critic = markdown_table(rows).splitlines()
    titles = [t.strip() for t in header.strip("|").split("|")]
    assert titles[2:5] == ["tokens/problem", "verifier tokens/problem", "problems"]
    assert titles[-1].startswith("vs maj@3")  # the interval column still comes last
    assert maj.split(" | ")[3] == "-" and best.split(" | ")[3] == "-"
    assert weighted.split(" | ")[3] == best_critic.split(" | ")[3] == f"{per_problem:.1f}"
    assert maj.endswith("| - |") and weighted.split(" | ")[-1] != "- |"


def test_the_column_appears_only_when_a_row_has_the_field():
    rows = [{"method": "maj@8", "accuracy": 0.5, "tokens_per_problem": 300.0, "problems": 4, "seconds": 1.0,
             "tokens_per_second": 1200.0}]
    assert "verifier" not in markdown_table(rows)
    critic_row = {**rows[0], "method": "weighted_maj[critic]@8", "verifier_tokens_per_problem": 512.25}
    assert markdown_table(rows + [critic_row]).splitlines()[0] == (
        "| method | accuracy | tokens/problem | verifier tokens/problem | problems | seconds | tokens/s |")
    assert markdown_table(rows + [critic_row]).splitlines()[2:] == [
        "| maj@8 | 50.0% | 300.0 | - | 4 | 1.0 | 1200 |",
        "| weighted_maj[critic]@8 | 50.0% | 300.0 | 512.2 | 4 | 1.0 | 1200 |"]
    curve = [{"method": "maj", "budget": 64, "accuracy": 0.5, "tokens_per_problem": 64.0, "problems": 4}]
    assert "verifier" not in curves_table(curve)
    critic_curve = {**curve[0], "method": "weighted_maj[critic]", "verifier_tokens_per_problem": 80.0}
    assert curves_table(curve + [critic_curve]).splitlines() == [
        "| method | budget (tokens/problem) | accuracy | tokens/problem | verifier tokens/problem | problems |",
        "|---|---|---|---|---|---|",
        "| maj | 64 | 50.0% | 64.0 | - | 4 |",
        "| weighted_maj[critic] | 64 | 50.0% | 64.0 | 80.0 | 4 |"]


def test_curve_rows_carry_the_critics_tokens():
    critic, scorers = critic_and_scorers()
    policy = ScriptedPolicy({"": ["#### 5\n", "#### 7\n", "#### 5\n"]})
    methods = [SearchSettings(method="maj", n=3),
               SearchSettings(method="weighted_maj", n=3, verifier="critic", aggregation="last")]
    rows = evaluate_curves(policy, stepwise_env(), methods, [7, 21], scorers, episodes=2, baseline="maj")
    counted = [r for r in rows if "verifier_tokens_per_problem" in r]
    assert [(r["method"], r["budget"]) for r in counted] == [("weighted_maj[critic]", 7), ("weighted_maj[critic]", 21)]
    assert all(r["verifier_tokens_per_problem"] > 0 for r in counted)
    assert sum(r["verifier_tokens_per_problem"] * r["problems"] for r in counted) == critic.tokens_generated
    assert "| verifier tokens/problem |" in curves_table(rows)
