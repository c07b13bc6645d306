"""pycoll.layout: tensor layouts over a device mesh and redistribution
between them (tests/mpi_cases.py, group_layouts)."""
import re

import pytest

from mpirun import launch, run_ranks

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("p", [1, 3, 4, 6, 8])
def test_redistribution_on_every_mesh(p):
    """Every kind of placement change, nested splits included, on every
    mesh of p ranks (1-D, each pair of factors, (2, 2, 2) at p = 8), on
    blocks of float64, int32, bfloat16 and float32, against the global
    tensor; the steps chosen; the seeds' Z = (X W) V and MatMul (2, 4),
    (4, 1) then ReLU (8, 1); errors before any message."""
    run_ranks(p, "layouts")


def test_layout_benchmark_script():
    """bench/layout.py at p = 3 (the README's numbers come from it): a line
    per block size, every call timed."""
    proc = launch(3, ["bench/layout.py", "--rows", "6", "12", "--calls", "2"], timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert [line.split(",")[0].split(" block")[0] for line in lines] == ["24 KiB", "48 KiB"], lines
    for line in lines:
        assert len(re.findall(r" \d+ us", line)) == 5, line
