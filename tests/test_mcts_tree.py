"""MCTS tree arithmetic against a hand-worked tree: UCB1, PUCT, selection, virtual loss, mean backup."""
import math

import pytest

from lmgym.episodes.engine import Branch
from lmgym.search.mcts_tree import Node, add_virtual_loss, backup, puct, select_child, select_leaf, ucb1, walk


def node(visits=0, value_sum=0.0, prior=1.0) -> Node:
    return Node(Branch(group_id=0, member=0, prompt_ids=[1], state={}), visits=visits, value_sum=value_sum,
                prior=prior)


def hand_tree():
    """root (N=10, W=6) with a (6, 4.2, P=0.5), b (3, 1.5, P=0.3), c (1, 0.3, P=0.2)."""
    root = node(10, 6.0)
    a, b, c = (root.add_child(node(*stats)) for stats in ((6, 4.2, 0.5), (3, 1.5, 0.3), (1, 0.3, 0.2)))
    return root, a, b, c


def test_ucb1_and_puct_match_the_hand_values():
    root, a, b, c = hand_tree()
    # UCB1 = Q + c sqrt(ln N / n): 0.7 + sqrt(ln 10 / 6), 0.5 + sqrt(ln 10 / 3), 0.3 + sqrt(ln 10)
    assert [ucb1(x, 10, 1.0) for x in (a, b, c)] == pytest.approx([1.319487, 1.376087, 1.817427], abs=1e-6)
    # PUCT = Q + c P sqrt(N) / (1 + n): 0.7 + 0.5 sqrt(10) / 7, 0.5 + 0.3 sqrt(10) / 4, 0.3 + 0.2 sqrt(10) / 2
    assert [puct(x, 10, 1.0) for x in (a, b, c)] == pytest.approx([0.925877, 0.737171, 0.616228], abs=1e-6)
    assert select_child(root, 1.0, "ucb1") is c  # the rarely tried child
    assert select_child(root, 1.0, "puct") is a  # the prior and value favour a
    assert select_child(root, 0.0, "ucb1") is a  # no exploration: the best mean
    assert ucb1(node(), 10, 1.0) == math.inf
    assert puct(node(prior=0.25), 16, 2.0) == pytest.approx(2.0)  # 0 + 2 * 0.25 * 4 / 1


def test_mean_backup_updates_the_path_to_the_root_only():
    root, a, b, c = hand_tree()
    leaf = b.add_child(node())
    backup(leaf, 0.9)
    assert (leaf.visits, leaf.value_sum, leaf.depth) == (1, 0.9, 2)
    assert (b.visits, b.value_sum) == (4, pytest.approx(2.4))
    assert (root.visits, root.value_sum) == (11, pytest.approx(6.9))
    assert (a.visits, a.value_sum, c.visits, c.value_sum) == (6, 4.2, 1, 0.3)
    assert b.q == pytest.approx(0.6) and leaf.path() == [root, b, leaf]
    assert list(walk(root)) == [root, a, b, leaf, c]
    with pytest.raises(ValueError, match="^backup: value must be finite, got nan$"):
        backup(leaf, float("nan"))


def test_virtual_loss_counts_as_a_lost_visit_until_taken_back():
    root, a, b, c = hand_tree()
    assert select_child(root, 1.0, "ucb1") is c
    add_virtual_loss(c)  # c: 1 visit + 1 pending, Q = 0.3 / 2; root: 10 + 1 pending
    assert c.q == pytest.approx(0.15) and root.virtual_loss == 1 and a.virtual_loss == 0
    # c: 0.15 + sqrt(ln 11 / 2) = 1.244965, b: 0.5 + sqrt(ln 11 / 3) = 1.394035, a: 0.7 + sqrt(ln 11 / 6)
    assert ucb1(c, 11, 1.0) == pytest.approx(1.244965, abs=1e-6)
    assert ucb1(b, 11, 1.0) == pytest.approx(1.394035, abs=1e-6)
    assert select_child(root, 1.0, "ucb1") is b
    add_virtual_loss(c, -1)
    assert (c.virtual_loss, root.virtual_loss, c.q) == (0, 0, pytest.approx(0.3))
    with pytest.raises(ValueError, match="more virtual loss taken back than was added"):
        add_virtual_loss(c, -1)


def test_select_leaf_descends_and_bad_calls_are_named():
    root, a, b, c = hand_tree()
    deep = a.add_child(node(1, 1.0))
    a.add_child(node(1, 0.0))
    assert select_leaf(root, 0.0, "puct") is deep
    with pytest.raises(ValueError, match="^select_child: rule must be one of puct, ucb1; got 'uct'$"):
        select_child(root, 1.0, "uct")
    with pytest.raises(ValueError, match="no children"):
        select_child(c, 1.0)
