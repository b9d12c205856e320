"""Communication graphs of the decentralised algorithms, and their mixing weights.

Small, pure classes (no communication): given a node's index (its worker rank) and the
round (step) number they say whom a node sends to, whom it receives from, and with what
weight. Shared by ``sgp`` (:class:`Exponential`), ``adpsgd`` (:class:`Bipartite`) and
``fast`` (:class:`Ring`, :class:`Torus`); see docs/algorithms.md section 3.

References:
    Assran, Loizou, Ballas, Rabbat, "Stochastic Gradient Push for Distributed Deep Learning",
    ICML 2019 (time-varying directed exponential graph, uniform push-sum weights).
    Lian, Zhang, Zhang, Liu, "Asynchronous Decentralized Parallel Stochastic Gradient Descent",
    ICML 2018 (bipartite active/passive graph).
    Viviani, Drocco, Baccega, Colonnelli, Aldinucci, "Deep Learning at Scale", PDP 2019 (ring, torus).
"""

from __future__ import annotations

import math


def _check_node(n: int, i: int) -> None:
    if not 0 <= i < n:
        raise ValueError(f"node {i} out of range for a graph of {n} nodes")


class Graph:
    """A (possibly time-varying) graph over nodes 0..n-1."""

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"a graph needs at least one node, got n={n}")
        self.n = n

    def out_peers(self, i: int, t: int = 0) -> list[int]:
        """Nodes that node ``i`` sends to in round ``t``."""
        raise NotImplementedError

    def in_peers(self, i: int, t: int = 0) -> list[int]:
        """Nodes that send to node ``i`` in round ``t``: those whose out-peers include ``i``."""
        return [j for j in range(self.n) if i in self.out_peers(j, t)]

    def mixing_weight(self, i: int, t: int = 0) -> float:
        """Uniform column-stochastic weight p = 1/(out-degree + 1): node ``i`` keeps p of its mass
        and sends p to each out-peer, so the total mass is conserved (push-sum)."""
        return 1.0 / (len(self.out_peers(i, t)) + 1)

    def mixing_matrix(self, t: int = 0) -> list[list[float]]:
        """P[j][i]: share of node i's mass that node j holds after round t (columns sum to 1)."""
        P = [[0.0] * self.n for _ in range(self.n)]
        for i in range(self.n):
            p = self.mixing_weight(i, t)
            P[i][i] += p
            for j in self.out_peers(i, t):
                P[j][i] += p
        return P


class Ring(Graph):
    """1-D ring: node i's neighbours are i-1 and i+1 (mod n), listed once (n=2: one neighbour)."""

    def out_peers(self, i: int, t: int = 0) -> list[int]:
        _check_node(self.n, i)
        return sorted({(i - 1) % self.n, (i + 1) % self.n} - {i})

    neighbours = out_peers


class Torus(Graph):
    """2-D torus of ``rows`` x ``cols`` nodes, row-major (node i is at (i // cols, i % cols));
    neighbours are up, down, left, right with wrap-around, each listed once. Without explicit
    sides, the most square factorisation of n is used (rows <= cols; a prime n is a 1 x n ring)."""

    def __init__(self, n: int, rows: int | None = None):
        super().__init__(n)
        if rows is None:
            rows = max(r for r in range(1, math.isqrt(n) + 1) if n % r == 0)
        if rows < 1 or n % rows:
            raise ValueError(f"a torus of {n} nodes cannot have {rows} rows")
        self.rows, self.cols = rows, n // rows

    def out_peers(self, i: int, t: int = 0) -> list[int]:
        _check_node(self.n, i)
        r, c = divmod(i, self.cols)
        around = {((r - 1) % self.rows) * self.cols + c, ((r + 1) % self.rows) * self.cols + c,
                  r * self.cols + (c - 1) % self.cols, r * self.cols + (c + 1) % self.cols}
        return sorted(around - {i})

    neighbours = out_peers


class Exponential(Graph):
    """Time-varying directed exponential graph (SGP): in round t node i sends to
    (i + 2^k) mod n for ``peers_per_step`` consecutive exponents k, cycling through
    k = 0..K-1 with K = floor(log2(n-1)) + 1 (the distinct powers of two below n)."""

    def __init__(self, n: int, peers_per_step: int = 1):
        super().__init__(n)
        self.num_exponents = int(math.floor(math.log2(n - 1))) + 1 if n > 1 else 0
        if n > 1 and not 1 <= peers_per_step <= self.num_exponents:
            raise ValueError(f"peers_per_step must be in [1, {self.num_exponents}] for {n} nodes, got {peers_per_step}")
        self.peers_per_step = peers_per_step

    def exponents(self, t: int) -> list[int]:
        """The exponents k used in round t."""
        K = self.num_exponents
        return [(t * self.peers_per_step + j) % K for j in range(self.peers_per_step)] if K else []

    def out_peers(self, i: int, t: int = 0) -> list[int]:
        _check_node(self.n, i)
        return [(i + 2 ** k) % self.n for k in self.exponents(t)]

    def in_peers(self, i: int, t: int = 0) -> list[int]:
        _check_node(self.n, i)
        return [(i - 2 ** k) % self.n for k in self.exponents(t)]


class Bipartite(Graph):
    """Bipartite active/passive graph (AD-PSGD): even nodes are active, odd nodes passive;
    edges join every active node to every passive node, so no two active nodes are ever
    paired. :meth:`partner` is a per-round matching (a rotation schedule): in round t the
    j-th active node pairs with passive node (j + t) mod A, where A is the number of active
    nodes; when that index has no passive node (n odd) the active node sits the round out.
    Every round is a matching, and over A consecutive rounds every edge is used once."""

    def is_active(self, i: int) -> bool:
        _check_node(self.n, i)
        return i % 2 == 0

    def out_peers(self, i: int, t: int = 0) -> list[int]:
        """All nodes on the other side (the graph's edges)."""
        _check_node(self.n, i)
        return [j for j in range(self.n) if j % 2 != i % 2]

    def partner(self, i: int, t: int) -> int | None:
        """The node that ``i`` averages with in round ``t`` (None: no partner this round)."""
        _check_node(self.n, i)
        num_active, num_passive = (self.n + 1) // 2, self.n // 2
        if num_passive == 0:
            return None
        if self.is_active(i):
            q = (i // 2 + t) % num_active
            return 2 * q + 1 if q < num_passive else None
        j = (i // 2 - t) % num_active  # the active index whose rotation lands on this passive node
        return 2 * j
