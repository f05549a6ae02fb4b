"""Pareto fronts and hypervolume (scripts/kellevp/pareto.py) on cases checked by hand."""
import itertools
import random

import pytest

from kellevp.pareto import dominates, front, hypervolume


def test_dominates():
    assert dominates([1, 2], [2, 2]) and not dominates([2, 2], [2, 2]) and not dominates([1, 3], [2, 2])
    assert not dominates([1, 2], [1.05, 2.05], scale=1.1)  # within 10 %: not dominated
    assert dominates([1, 2], [1.2, 2.3], scale=1.1)


def test_front():
    pts = [(1, 5), (2, 3), (3, 4), (4, 1), (2, 3), (5, 5)]
    # (3, 4) is dominated by (2, 3); (5, 5) by all; the two equal (2, 3) do not dominate each other
    assert front(pts, key=lambda p: p) == [(1, 5), (2, 3), (4, 1), (2, 3)]
    # within 50 %: (3, 4) scaled by 1/1.5 is not dominated by (2, 3) x 1.5 = (3, 4.5)
    assert (3, 4) in front(pts, key=lambda p: p, scale=1.5) and (5, 5) not in front(pts, key=lambda p: p, scale=1.5)


def test_hypervolume_by_hand():
    # 2-D: the staircase of (1, 3), (2, 2), (3, 1) under (4, 4): 3 + 2 + 1 = 6
    assert hypervolume([(1, 3), (2, 2), (3, 1)], (4, 4)) == pytest.approx(6)
    # a dominated point and a point beyond the reference add nothing
    assert hypervolume([(1, 3), (2, 2), (3, 1), (3, 3), (5, 0)], (4, 4)) == pytest.approx(6)
    # 3-D: one box, and two overlapping boxes (2x2x1 + 1x1x2 - overlap 1x1x1 = 4 + 2 - 1)
    assert hypervolume([(0, 0, 0)], (1, 2, 3)) == pytest.approx(6)
    assert hypervolume([(0, 0, 1), (1, 1, 0)], (2, 2, 2)) == pytest.approx(5)
    # 1-D
    assert hypervolume([(0.25,), (0.5,)], (1.0,)) == pytest.approx(0.75)
    assert hypervolume([], (1, 1)) == 0


def test_hypervolume_against_a_grid_count():
    # random fronts in 3-D on an integer lattice: the volume equals the count of dominated unit cells
    rng = random.Random(7)
    for _ in range(20):
        pts = [tuple(rng.randrange(0, 6) for _ in range(3)) for _ in range(rng.randrange(1, 8))]
        cells = sum(1 for c in itertools.product(range(6), repeat=3)
                    if any(all(p[i] <= c[i] for i in range(3)) for p in pts))
        assert hypervolume(pts, (6, 6, 6)) == pytest.approx(cells)
