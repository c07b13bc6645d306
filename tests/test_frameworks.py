"""Embedding under frameworks: torch and JAX inputs, logging, the data-parallel
and ZeRO helpers, the DDP hook, and the examples (under mpiexec)."""
import importlib.util
import sys

import pytest

from mpirun import launch, run_ranks

pytestmark = pytest.mark.mpi

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_JAX = importlib.util.find_spec("jax") is not None


@pytest.mark.parametrize("p", [1, 2, 3])
def test_helpers_logging_callbacks(p):
    """DataParallel, ShardedOptimizer (uneven blocks), logging, done-callbacks."""
    run_ranks(p, "frameworks")


@pytest.mark.parametrize("example", ["mlp_data_parallel.py", "zero_sharded.py"])
@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_numpy_examples_match_single_process_training(example, p):
    """50 steps on P ranks: per-step losses within 1e-9 (relative) of
    single-process full-batch training (the example checks and exits 1)."""
    proc = launch(p, [f"examples/{example}"], timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "(OK)" in proc.stdout, proc.stdout


@pytest.mark.parametrize("p", [2, 4])
def test_tensor_parallel_example_matches_single_process_training(p):
    """examples/mlp_tensor_parallel.py: the MLP on a (P / 2, 2) mesh of data
    and tensor ranks (pycoll.layout), within 1e-9 of single-process training."""
    proc = launch(p, ["examples/mlp_tensor_parallel.py"], timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"mesh ({p // 2}, 2)" in proc.stdout and "(OK)" in proc.stdout, proc.stdout


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (pip install -e '.[torch]')")
@pytest.mark.parametrize("p", [2, 4])
def test_torch_ddp_hook_example(p):
    """DDP over gloo with pycoll's allreduce_hook and its bfloat16 variant."""
    proc = launch(p, ["examples/torch_ddp.py"], timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("OK") == 2, proc.stdout


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (pip install -e '.[torch]')")
@pytest.mark.parametrize("p", [1, 3])
def test_the_same_as_torch_distributed(p):
    """README's "Coming from torch.distributed" table: each call over gloo
    and its pycoll counterpart give the same values (float32, int64,
    bfloat16)."""
    run_ranks(p, "against_torch")


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
def test_compressed_hook_rejects_other_dtypes():
    import torch

    import pycoll.contrib.torch as pt
    with pytest.raises(ValueError, match="torch.bfloat16 or torch.float16"):
        pt.compressed_allreduce_hook(torch.float32)


@pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed")
def test_jax_arrays():
    run_ranks(2, "jax")


def test_importing_contrib_does_not_import_torch():
    """pycoll.contrib is a namespace of bridges; torch loads only with pycoll.contrib.torch."""
    import subprocess
    code = "import sys, pycoll, pycoll.contrib; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False" and out.stderr == ""
