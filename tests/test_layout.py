"""pycoll.layout: tensor layouts over a device mesh and redistribution
between them (tests/mpi_cases.py, group_layouts)."""
import pytest

from mpirun import run_ranks

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("p", [1, 3, 4, 6, 8])
def test_redistribution_on_every_mesh(p):
    """Every kind of placement change, on every mesh of p ranks (1-D, each
    pair of factors, (2, 2, 2) at p = 8), on blocks of float64, int32,
    bfloat16 and float32, against the global tensor; the steps chosen;
    the seed's Z = (X W) V; errors before any message."""
    run_ranks(p, "layouts")
