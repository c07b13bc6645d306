"""DeviceMesh.plan on meshes of up to 12 ranks, without MPI: each plan is
run on every rank's block at once by a model of its steps (numpy on one
process), from blocks made by the definition of a layout, and must end
with the blocks the destination layout defines (tests/mpi_cases.py,
group_layouts, runs the real collectives)."""
import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pycoll.layout import PARTIAL, DeviceMesh


def mesh_of(shape: tuple) -> DeviceMesh:
    """A DeviceMesh of *shape* for planning only (no communicator)."""
    mesh = object.__new__(DeviceMesh)
    mesh.shape = shape
    return mesh


def block_at(whole: np.ndarray, placements, coord, shape) -> np.ndarray:
    """The definition: along each tensor dimension, the mesh dimensions
    splitting it cut it in turn, the lower one first (outside)."""
    for k, d in enumerate(placements):
        if type(d) is int:
            whole = np.split(whole, shape[k], axis=d)[coord[k]]
    return whole


def run_steps(shape, steps, blocks: dict) -> dict:
    """Every rank's block after *steps*, each collective done on its groups."""
    for step in steps:
        kind, k, d = step[:3]
        m = shape[k]
        groups: dict = {}
        for c in sorted(blocks, key=lambda c: c[k]):
            groups.setdefault(c[:k] + c[k + 1:], []).append(c)
        new = {}
        for members in groups.values():
            xs = [blocks[c] for c in members]
            for c in members:
                if kind == "allreduce":
                    new[c] = sum(xs)
                elif kind == "reduce_scatter":
                    new[c] = np.split(sum(xs), m, axis=d)[c[k]]
                elif kind == "allgather":
                    new[c] = np.concatenate(xs, axis=d)
                elif kind == "alltoall":
                    new[c] = np.concatenate([np.split(x, m, axis=step[3])[c[k]] for x in xs],
                                            axis=d)
                else:
                    assert kind == "slice", step
                    new[c] = np.split(blocks[c], m, axis=d)[c[k]]
        blocks = new
    return blocks


@st.composite
def cases(draw):
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)
                       .filter(lambda s: math.prod(s) <= 12)))
    ndim = draw(st.integers(1, 3))
    kinds = st.sampled_from([None, PARTIAL, *range(ndim)])
    src = tuple(draw(st.lists(kinds, min_size=len(shape), max_size=len(shape))))
    dst = tuple(draw(st.lists(kinds, min_size=len(shape), max_size=len(shape))))
    dst = tuple(None if q == PARTIAL and src[k] != PARTIAL else q for k, q in enumerate(dst))
    return shape, ndim, src, dst


@settings(max_examples=400, deadline=None)
@given(cases())
def test_every_plan_ends_in_its_layout(case):
    shape, ndim, src, dst = case
    mesh = mesh_of(shape)
    ranks = math.prod(shape)
    whole = np.random.default_rng(0).integers(0, 10, (ranks,) * ndim)
    coords = list(itertools.product(*map(range, shape)))
    # a partial mesh dimension: coordinate 0 holds the values, the others 0
    blocks = {c: block_at(whole, src, c, shape) * all(c[k] == 0 for k, q in enumerate(src)
                                                      if q == PARTIAL)
              for c in coords}
    steps = mesh.plan(blocks[coords[0]].shape, src, dst)
    assert all(shape[s[1]] > 1 for s in steps), steps
    assert len(steps) <= 2 * len(shape), steps
    if src == dst:
        assert steps == []
    # the partial dimensions dst keeps, summed at the end to compare
    sums = [("allreduce", k, None) for k, q in enumerate(dst) if q == PARTIAL and shape[k] > 1]
    got = run_steps(shape, steps + sums, blocks)
    for c in coords:
        expected = block_at(whole, dst, c, shape)
        assert got[c].shape == expected.shape and np.array_equal(got[c], expected), (c, steps)


def test_nested_splits_number_the_blocks_as_the_ranks():
    """(0, 0) on a (2, 3) mesh: rank r = 3 i + j holds block r of 6."""
    whole = np.arange(12)
    for i, j in itertools.product(range(2), range(3)):
        assert block_at(whole, (0, 0), (i, j), (2, 3)).tolist() == [2 * (3 * i + j),
                                                                    2 * (3 * i + j) + 1]
    assert mesh_of((2, 3)).plan((6,), (0, PARTIAL), (0, 0)) == [("reduce_scatter", 1, 0)]
