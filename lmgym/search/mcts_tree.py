"""The search tree of MCTS over reasoning steps: nodes, selection scores (UCB1, PUCT), virtual loss, backup.

A `Node` holds one engine `Branch` (the episode after the node's step) and the statistics that search
reads: `visits` and `value_sum` (mean backup: Q = value_sum / visits), the PUCT `prior`, the node's own
evaluation `score` and, while a wave of leaves is being expanded, its `virtual_loss` (pending visits
that count as visits of value 0, so the other selections of the wave go elsewhere). The functions here
are pure tree arithmetic; `lmgym.search.mcts.MCTS` does the sampling and scoring.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from lmgym.episodes.engine import Branch

SELECTIONS = ("puct", "ucb1")


@dataclass(eq=False)
class Node:
    """One step of a search tree (the root: the episode's start, no step).

    branch: the episode after this node's step. tokens: policy-sampled tokens of the step (the branch's
    over its parent's). score: this node's own evaluation (None: not evaluated; the root). terminal: the
    episode cannot go on from here (the env ended it, or a step or depth limit), so the node is never
    expanded and a selection that reaches it backs up `score` again.
    """

    branch: Branch
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    visits: int = 0
    value_sum: float = 0.0
    prior: float = 1.0
    score: float | None = None
    terminal: bool = False
    virtual_loss: int = 0
    tokens: int = 0
    depth: int = 0

    @property
    def q(self) -> float:
        """Mean backed-up value, pending visits (virtual loss) counted as value 0; 0.0 when never visited."""
        n = self.visits + self.virtual_loss
        return self.value_sum / n if n else 0.0

    @property
    def finished(self) -> bool:
        """The env ended this node's episode (an answer, or the env's own step limit)."""
        return self.branch.done

    def add_child(self, child: Node) -> Node:
        """Attach `child` under this node (its parent and depth set); returns it."""
        child.parent, child.depth = self, self.depth + 1
        self.children.append(child)
        return child

    def path(self) -> list[Node]:
        """The nodes from the root down to this one."""
        nodes, node = [], self
        while node is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]


def walk(root: Node) -> Iterator[Node]:
    """Every node of the tree under `root` (root included), parents before children."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def ucb1(child: Node, parent_visits: int, c: float) -> float:
    """UCB1: Q + c * sqrt(ln N_parent / n_child); +inf for a child never visited."""
    n = child.visits + child.virtual_loss
    if n == 0:
        return math.inf
    return child.q + c * math.sqrt(math.log(max(parent_visits, 1)) / n)


def puct(child: Node, parent_visits: int, c: float) -> float:
    """PUCT (AlphaZero): Q + c * prior * sqrt(N_parent) / (1 + n_child)."""
    n = child.visits + child.virtual_loss
    return child.q + c * child.prior * math.sqrt(max(parent_visits, 0)) / (1 + n)


def select_child(node: Node, c: float, rule: str = "puct") -> Node:
    """The child of `node` with the highest `rule` score (the first of equals); ValueError without children."""
    if rule not in SELECTIONS:
        raise ValueError(f"select_child: rule must be one of {', '.join(SELECTIONS)}; got {rule!r}")
    if not node.children:
        raise ValueError("select_child: the node has no children")
    score = puct if rule == "puct" else ucb1
    parent_visits = node.visits + node.virtual_loss
    return max(node.children, key=lambda child: score(child, parent_visits, c))


def select_leaf(root: Node, c: float, rule: str = "puct") -> Node:
    """Descend from `root` by `select_child` to a node without children."""
    node = root
    while node.children:
        node = select_child(node, c, rule)
    return node


def add_virtual_loss(node: Node, amount: int = 1) -> None:
    """Add `amount` pending visits to `node` and each ancestor (a negative amount takes them back)."""
    for each in node.path():
        each.virtual_loss += amount
        if each.virtual_loss < 0:
            raise ValueError("add_virtual_loss: more virtual loss taken back than was added")


def backup(node: Node, value: float) -> None:
    """Mean backup: visits += 1 and value_sum += value for `node` and every ancestor up to the root."""
    if not math.isfinite(value):
        raise ValueError(f"backup: value must be finite, got {value!r}")
    for each in node.path():
        each.visits += 1
        each.value_sum += value
