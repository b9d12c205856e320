"""bench.topology: ring, torus, exponential and bipartite graphs, and push-sum mixing weights."""

from __future__ import annotations

import pytest

from bench.topology import Bipartite, Exponential, Ring, Torus


def test_exponential_peers_cycle_through_powers_of_two():
    g = Exponential(8)
    assert g.num_exponents == 3  # 2^0, 2^1, 2^2 < 8
    assert [g.out_peers(3, t) for t in range(7)] == [[4], [5], [7], [4], [5], [7], [4]]
    assert [g.in_peers(3, t) for t in range(3)] == [[2], [1], [7]]
    # two peers per step: consecutive exponents, still cycling
    g2 = Exponential(8, peers_per_step=2)
    assert [g2.exponents(t) for t in range(4)] == [[0, 1], [2, 0], [1, 2], [0, 1]]
    assert g2.out_peers(6, 1) == [(6 + 4) % 8, (6 + 1) % 8]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9])
def test_exponential_in_peers_invert_out_peers(n):
    g = Exponential(n)
    assert g.num_exponents == len({2 ** k % n for k in range(8) if 2 ** k < n})
    for t in range(2 * g.num_exponents):
        for i in range(n):
            assert g.in_peers(i, t) == [j for j in range(n) if i in g.out_peers(j, t)]
            assert i not in g.out_peers(i, t)


def test_exponential_rejects_too_many_peers():
    with pytest.raises(ValueError, match=r"peers_per_step must be in \[1, 2\]"):
        Exponential(4, peers_per_step=3)


@pytest.mark.parametrize("n,t", [(4, 0), (5, 1), (8, 2)])
def test_push_sum_mixing_matrix_is_column_stochastic(n, t):
    P = Exponential(n).mixing_matrix(t)
    for i in range(n):
        assert sum(P[j][i] for j in range(n)) == pytest.approx(1.0)
        assert P[i][i] == pytest.approx(0.5)


def test_ring_neighbours():
    assert Ring(5).out_peers(0) == [1, 4]
    assert Ring(5).out_peers(3) == [2, 4]
    assert Ring(2).out_peers(1) == [0]  # one neighbour, listed once
    assert Ring(1).out_peers(0) == []


def test_torus_of_4_nodes():
    g = Torus(4)
    assert (g.rows, g.cols) == (2, 2)
    # 0 1 / 2 3: up and down coincide, left and right coincide
    assert [g.neighbours(i) for i in range(4)] == [[1, 2], [0, 3], [0, 3], [1, 2]]


def test_torus_of_9_nodes():
    g = Torus(9)
    assert (g.rows, g.cols) == (3, 3)
    # 0 1 2 / 3 4 5 / 6 7 8
    assert g.neighbours(4) == [1, 3, 5, 7]
    assert g.neighbours(0) == [1, 2, 3, 6]
    assert g.neighbours(8) == [2, 5, 6, 7]
    for i in range(9):  # symmetric, 4 distinct neighbours each
        assert len(g.neighbours(i)) == 4
        assert all(i in g.neighbours(j) for j in g.neighbours(i))


def test_torus_shapes():
    assert (Torus(6).rows, Torus(6).cols) == (2, 3)
    assert Torus(7).neighbours(0) == Ring(7).neighbours(0)  # prime: a 1 x n ring
    with pytest.raises(ValueError, match="cannot have 4 rows"):
        Torus(6, rows=4)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8])
def test_bipartite_pairing_is_a_matching_that_never_pairs_two_active_nodes(n):
    g = Bipartite(n)
    active = [i for i in range(n) if g.is_active(i)]
    assert active == list(range(0, n, 2))
    edges = set()
    for t in range(2 * n):
        seen = set()
        for i in range(n):
            j = g.partner(i, t)
            if j is None:
                continue
            assert g.is_active(i) != g.is_active(j), f"round {t}: {i} and {j} on the same side"
            assert g.partner(j, t) == i, f"round {t}: pairing of {i} and {j} is not mutual"
            assert i not in seen
            seen.add(i)
            edges.add(frozenset((i, j)))
        if n % 2 == 0:  # even n: a perfect matching every round
            assert len(seen) == n
    # the rotation uses every active-passive edge
    assert edges == {frozenset((a, p)) for a in active for p in range(1, n, 2)}


def test_bipartite_single_node_has_no_partner():
    assert Bipartite(1).partner(0, 3) is None

