"""The portable float16/bfloat16 loops give x86's bits on AArch64.

pycoll's half-precision loops at AVX-512 and AVX2 are tested against each
other and against the portable level in test_kernels.py, on this machine.
Elsewhere (AArch64) only the portable level runs, with the float16
conversions done by the CPU (src/half.c). This test builds
tests/half_outputs.c with src/half.c twice, for this machine and for
AArch64, runs the second under qemu, and compares every output byte: SUM
and PROD on every 16-bit pattern, AVG's division, widening every pattern
and narrowing 2^22 float32 patterns spread over all 2^32.

It needs a cross compiler and qemu (Debian: gcc-aarch64-linux-gnu,
qemu-user) and is skipped without them.
"""
import ast
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "pycoll" / "_kernels" / "src"
HARNESS = Path(__file__).resolve().parent / "half_outputs.c"


def compile_args() -> list:
    """setup.py's COMPILE_ARGS, the flags the kernels are built with (they
    decide the bits), read from its source: importing it would run setup()."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    return next(ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "COMPILE_ARGS" for t in node.targets))


FLAGS = compile_args()
CROSS, QEMU = "aarch64-linux-gnu-gcc", "qemu-aarch64"
OUTPUT_BYTES = 4 * (2 * 65536 - 5) * 2 + 2 * ((65536 - 3) * 2 + 65536 * 4 + (1 << 22) * 2)


def build(compiler, exe, *extra):
    subprocess.run([compiler, *FLAGS, *extra, f"-I{SRC}", str(HARNESS), str(SRC / "half.c"),
                    "-o", str(exe)], check=True, timeout=300)


def outputs(command):
    run = subprocess.run(command, capture_output=True, check=True, timeout=300)
    assert len(run.stdout) == OUTPUT_BYTES, f"{command}: {len(run.stdout)} bytes"
    return run.stdout


@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which(CROSS) and shutil.which(QEMU)),
                    reason=f"needs gcc, {CROSS} and {QEMU}")
def test_aarch64_gives_the_bits_of_every_x86_level(tmp_path):
    build("gcc", tmp_path / "host")
    build(CROSS, tmp_path / "aarch64", "-static")
    arm = outputs([QEMU, str(tmp_path / "aarch64")])
    levels = ("baseline", "avx2", "avx512", "avx512bf16")
    checked = []
    for level in levels:
        try:
            host = outputs([str(tmp_path / "host"), level])
        except subprocess.CalledProcessError as e:
            assert e.returncode == 2, f"{level}: exit {e.returncode}"      # not on this CPU
            continue
        checked.append(level)
        first = next(i for i in range(len(host) + 1) if i == len(host) or host[i] != arm[i])
        assert host == arm, f"AArch64 differs from {level} from byte {first}"
    assert "baseline" in checked
