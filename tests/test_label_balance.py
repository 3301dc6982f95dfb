"""traindata/step_data/label_balance.py on a synthetic label set: the balanced sampler hits the target share of
right solutions (keeping every sample of the scarce label), reports the balance, and keeps the first n problems."""
import pytest

from lmgym.traindata.step_data import LabelledSample
from lmgym.traindata.step_data.label_balance import (
    balanced_samples,
    balanced_sources,
    first_problems,
    label_balance,
    source_auc,
)


def synthetic(problems=40, per_problem=8, right_every=15):
    """problems x per_problem samples; sample k (counted over the whole set) is right when k % right_every == 0."""
    out, k = [], 0
    for p in range(problems):
        for j in range(per_problem):
            out.append(LabelledSample(f"q{p}", f"L2/{p}", (f"step {j}",), k % right_every == 0, str(j)))
            k += 1
    return out


def test_label_balance_counts_the_labels_and_problems():
    samples = synthetic()  # 320 samples, right at k = 0, 15, ..., 315: 22 of them
    balance = label_balance(samples)
    assert (balance["samples"], balance["right"], balance["wrong"]) == (320, 22, 298)
    assert balance["right_share"] == pytest.approx(22 / 320)
    assert balance["problems"] == 40 and balance["problems_with_right"] == 22  # 15 > 8: one right a problem at most
    assert label_balance([])["right_share"] == 0.0


@pytest.mark.parametrize("share, right, wrong", [(0.5, 22, 22), (0.25, 22, 66), (0.1, 22, 198)])
def test_balanced_samples_keep_every_right_one_and_draw_wrong_ones_to_the_share(share, right, wrong):
    samples = synthetic()
    chosen = balanced_samples(samples, share, seed=3)
    balance = label_balance(chosen)
    assert (balance["right"], balance["wrong"]) == (right, wrong)
    assert balance["right_share"] == pytest.approx(share)
    order = {id(s): i for i, s in enumerate(samples)}
    assert [order[id(s)] for s in chosen] == sorted(order[id(s)] for s in chosen)  # original order kept
    assert balanced_samples(samples, share, seed=3) == chosen and balanced_samples(samples, share, seed=4) != chosen


def test_too_many_right_ones_are_drawn_down_and_one_label_sets_are_kept_whole():
    flipped = [LabelledSample(s.question, s.problem_id, s.steps, not s.correct, s.answer) for s in synthetic()]
    balance = label_balance(balanced_samples(flipped, 0.6, seed=0))  # 298 right, 22 wrong: 33 right kept
    assert (balance["right"], balance["wrong"]) == (33, 22)
    wrong_only = [s for s in synthetic() if not s.correct]
    assert balanced_samples(wrong_only, 0.5) == wrong_only
    with pytest.raises(ValueError, match="right_share must be in"):
        balanced_samples(wrong_only, 1.0)


def test_first_problems_keeps_whole_problems_in_order():
    samples = synthetic(problems=5, per_problem=3)
    kept = first_problems(samples, 2)
    assert [s.problem_id for s in kept] == ["L2/0"] * 3 + ["L2/1"] * 3
    assert first_problems(samples, 99) == samples
    with pytest.raises(ValueError, match=">= 1"):
        first_problems(samples, 0)


def source(name, right, wrong):
    """`right` right and `wrong` wrong samples of one policy, one problem each."""
    return [LabelledSample(f"q{i}", f"{name}/{i}", (f"{name} step",), i < right, str(i)) for i in range(right + wrong)]


def test_source_auc_by_hand():
    # shares 1/4 and 3/4: positives scored .75 (3 of B) and .25 (1 of A) against negatives .25 (3 of A), .75 (1 of
    # B): B's 3 beat A's 3 (9 pairs), ties within A (3) and within B (3) count half, A's one loses to B's: 12 / 16
    assert source_auc({"A": source("A", 1, 3), "B": source("B", 3, 1)}) == pytest.approx(0.75)
    assert source_auc({"A": source("A", 2, 2), "B": source("B", 1, 1)}) == pytest.approx(0.5)
    assert source_auc({"A": source("A", 0, 3)}) is None


def test_per_policy_balance_leaves_the_source_saying_nothing_of_the_label():
    """The twenty-seventh session's L2 labels in small: the policy right 1 in 20, the budgeted SFT 6 in 10.
    Pooled balancing keeps every right one, most of them the SFT's, so the source predicts the label; per
    policy, each source is balanced on its own."""
    sources = {"policy": source("policy", 4, 76), "second": source("second", 48, 32)}
    pooled, report = balanced_sources(sources, 0.5, seed=0, mode="pooled")
    assert label_balance(pooled)["right_share"] == 0.5 and report["source_auc"]["after"] > 0.75
    assert pooled == balanced_samples(sources["policy"] + sources["second"], 0.5, 0)  # the old behaviour
    kept, report = balanced_sources(sources, 0.5, seed=0)
    assert report["mode"] == "per_policy" and report["source_auc"]["after"] == pytest.approx(0.5)
    assert [(report["sources"][k]["after"]["right"], report["sources"][k]["after"]["wrong"])
            for k in ("policy", "second")] == [(4, 4), (32, 32)]
    assert report["after"] == label_balance(kept) and label_balance(kept)["samples"] == 72
    assert report["before"] == label_balance(sources["policy"] + sources["second"])
    assert report["source_auc"]["before"] == pytest.approx(source_auc(sources))
    unbalanced, report = balanced_sources(sources, 0, seed=0)
    assert unbalanced == sources["policy"] + sources["second"] and report["after"] == report["before"]
    with pytest.raises(ValueError, match="balance mode must be one of per_policy, pooled"):
        balanced_sources(sources, 0.5, mode="mixed")
