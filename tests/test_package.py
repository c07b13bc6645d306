"""Package hygiene and the algorithms' interface, no MPI launch."""
import ast
import importlib
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

import pycoll
from pycoll.algorithms import ALGORITHMS, REGISTRY


def run_quietly(code: str) -> None:
    """Run *code* in a fresh interpreter: it must pass its asserts and print nothing."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""


def test_import_does_not_initialise_mpi_or_print():
    run_quietly("""
        import sys, pycoll, pycoll.parallel, pycoll.layout
        assert 'mpi4py.MPI' not in sys.modules, 'pycoll imported mpi4py.MPI'
        assert not [m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'torch', 'jax')]
    """)


def test_ml_dtypes_is_imported_when_bfloat16_is_first_used():
    """Note [Importing ml_dtypes]: import pycoll leaves ml_dtypes alone, and
    bfloat16 still works every way: a caller's array made after the import,
    pycoll's own use of the dtype, and pycoll.empty(n, "bfloat16")."""
    run_quietly("""
        import sys, numpy as np, pycoll
        from pycoll._dtypes import BY_NAME, dtype_of
        assert 'ml_dtypes' not in sys.modules, 'import pycoll imported ml_dtypes'
        try:
            dtype_of(np.dtype('U1'))
            raise AssertionError('dtype_of took U1')
        except TypeError as e:
            assert 'float16, bfloat16, float32' in str(e), e
        assert 'ml_dtypes' not in sys.modules, 'an unsupported dtype imported ml_dtypes'
        import ml_dtypes
        x = np.zeros(3, ml_dtypes.bfloat16)
        assert dtype_of(x.dtype) is BY_NAME['bfloat16']
        assert dtype_of(x.dtype.newbyteorder('=')) is BY_NAME['bfloat16']
        assert BY_NAME['bfloat16'].numpy == x.dtype
    """)
    run_quietly("""
        import sys, numpy as np
        from pycoll._dtypes import BY_NAME, dtype_of
        dt = BY_NAME['bfloat16'].numpy
        assert 'ml_dtypes' in sys.modules and dt.itemsize == 2
        assert dtype_of(np.zeros(2, dt).dtype) is BY_NAME['bfloat16']
    """)
    run_quietly("""
        import pycoll                   # "bfloat16" by name, before the caller imports ml_dtypes
        for n in (3, 1 << 20):          # numpy's empty, and huge pages
            assert pycoll.empty(n, 'bfloat16').dtype.name == 'bfloat16'
    """)


def test_an_unbuilt_source_tree_says_so(tmp_path):
    """Python started in a source tree whose extensions are not built (as after
    'pip install .' run from the repository root) gets one clear ImportError."""
    source = Path(pycoll.__file__).parent
    shutil.copytree(source, tmp_path / "pycoll", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    # -S: without site-packages, whose editable-install finder would find the real build.
    out = subprocess.run([sys.executable, "-S", "-c", "import pycoll"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: pycoll is imported from " + str(tmp_path / "pycoll")), last
    assert ("pycoll._mpicall, pycoll._resources, pycoll._lane_reduce, pycoll._lane_move, "
            "pycoll._kernels.copy, pycoll._kernels.reduce") in last, last
    assert "are not built" in last and "pip install -e ." in last, last


def test_the_sdist_carries_what_a_build_needs(tmp_path):
    """An sdist holds every Cython module, .pxd and hand-written C file the
    build compiles, and none of the C that Cython generates (MANIFEST.in)."""
    root = Path(pycoll.__file__).parent.parent
    if not (root / "setup.py").exists():
        pytest.skip("pycoll is not imported from a source tree")
    # egg_info in tmp_path: an old SOURCES.txt in the tree would add its files.
    out = subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "-e", str(tmp_path),
                          "sdist", "-d", str(tmp_path)],
                         cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    (tarball,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(tarball) as tar:
        shipped = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    sources = {str(path.relative_to(root)) for pattern in
               ("pycoll/*.pyx", "pycoll/*.pxd", "pycoll/_kernels/*.pyx", "pycoll/_kernels/*.pxd",
                "pycoll/_kernels/src/*.c", "pycoll/_kernels/src/*.h") for path in root.glob(pattern)}
    assert len(sources) > 10 and "pycoll/_lane_move.pyx" in sources, sorted(sources)
    assert not sources - shipped, f"missing from the sdist: {sorted(sources - shipped)}"
    generated = {name for name in shipped if name.endswith(".c") and "/src/" not in name}
    assert not generated, f"generated C in the sdist: {sorted(generated)}"


EXTENSIONS = ("pycoll._mpicall", "pycoll._resources", "pycoll._lane_reduce", "pycoll._lane_move",
              "pycoll._kernels.copy", "pycoll._kernels.reduce")


def stub_members(nodes) -> set:
    """The names a .pyi body declares: functions, classes and annotated names."""
    names = set()
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
    return names


@pytest.mark.parametrize("name", EXTENSIONS)
def test_each_extension_has_a_stub_that_matches_it(name):
    """Beside each Cython module, a .pyi for type checkers: every name it
    declares exists, and every public function and class the module defines
    (not one it imports) is declared, with each class's public methods."""
    module = importlib.import_module(name)
    stub = Path(module.__file__).parent / (name.rsplit(".", 1)[1] + ".pyi")
    tree = ast.parse(stub.read_text())
    declared = stub_members(tree.body)
    assert not {n for n in declared if not hasattr(module, n)}, f"{stub.name} declares names {name} lacks"
    own = {n for n, v in vars(module).items()
           if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == name}
    assert own <= declared, f"{stub.name} lacks {sorted(own - declared)}"
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(module, node.name)
            members = stub_members(node.body) - {"__init__"}
            public = {n for n in vars(cls) if not n.startswith("_")}
            assert public <= members, f"{stub.name}: {node.name} lacks {sorted(public - members)}"
            assert all(hasattr(cls, n) for n in members), f"{stub.name}: {node.name} {members}"


def test_the_package_carries_its_types(tmp_path):
    """What build_py puts in a wheel beside the modules: py.typed (PEP 561:
    type checkers read pycoll's annotations instead of refusing an untyped
    import) and each extension's .pyi."""
    root = Path(pycoll.__file__).parent.parent
    if not (root / "setup.py").exists():
        pytest.skip("pycoll is not imported from a source tree")
    out = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "-d", str(tmp_path)],
                         cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    shipped = {str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")}
    wanted = {"pycoll/py.typed", *(name.replace(".", "/") + ".pyi" for name in EXTENSIONS)}
    assert not wanted - shipped, f"missing from the build: {sorted(wanted - shipped)}"


def test_mypy_finds_no_errors(tmp_path):
    """pycoll type-checks clean under the project's mypy settings
    (pyproject.toml). mypy is a developer's tool, not a test dependency:
    without it this test skips."""
    api = pytest.importorskip("mypy.api")
    root = Path(pycoll.__file__).parent.parent
    if not (root / "pyproject.toml").exists():
        pytest.skip("pycoll is not imported from a source tree")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        report, errors, status = api.run(["--cache-dir", str(tmp_path / "cache")])
    assert status == 0, report + errors


def test_methods_take_what_the_functions_take():
    """comm.allreduce(...) and pycoll.allreduce(..., comm=comm) have the same
    parameters, defaults and annotations, but for comm."""
    import inspect
    for name in ALGORITHMS:
        function = inspect.signature(getattr(pycoll, name)).parameters
        method = inspect.signature(getattr(pycoll.Communicator, name)).parameters
        assert list(method)[0] == "self"
        assert [p for p in function if p != "comm"] == list(method)[1:], name
        for parameter in list(method)[1:]:
            a, b = function[parameter], method[parameter]
            assert (a.default, a.annotation) == (b.default, b.annotation), (name, parameter)
            assert a.annotation is not inspect.Parameter.empty, (name, parameter)
        assert function["comm"].annotation == "CommArg", name


# A caller's code as a type checker reads it against pycoll's annotations:
# each line marked "refused" must be an error to mypy, and no other line;
# the lines before the first of them run at p = 2.
_CALLER = '''\
import array
import datetime

import numpy as np
from mpi4py import MPI

import pycoll
from pycoll.layout import DeviceMesh
from pycoll.parallel import DataParallel, ShardedOptimizer, sgd

x = np.ones(4, np.float32)
comm = pycoll.Communicator()
tuned = pycoll.Communicator(MPI.COMM_WORLD, autotune=True)
pycoll.allreduce(x, op=pycoll.SUM, comm=comm, out=x, timeout=2.5)
pycoll.allreduce(x.astype(np.float16), op="max", accumulate=np.float32)
pycoll.allreduce(bytearray(8), op=MPI.SUM, comm=MPI.COMM_WORLD,
                 timeout=datetime.timedelta(seconds=3))
pycoll.reduce(array.array("f", [1.0]), root=np.int64(1))
pycoll.allreduce(np.float32(1.0))
pycoll.broadcast(x if comm.rank == 1 else None, root=1)
pycoll.scatter(x if comm.rank == 0 else None, comm=tuned)
pycoll.gather(x, sizes=np.array([4] * comm.size))
pycoll.allgather(memoryview(bytearray(8)), sizes=[8] * comm.size)
comm.scatter(x if comm.rank == 0 else None, sizes=(4,) + (0,) * (comm.size - 1))
pycoll.reduce_scatter(x, sizes=iter([0] * (comm.size - 1) + [4]))
comm.alltoall(x, sizes=np.diag([4] * comm.size))
comm.scan(x, pycoll.AVG, exclusive=True)
pycoll.barrier(comm, timeout=None)
fm = pycoll.FusionManager(pycoll.SUM, comm, bucket_bytes=1 << 20)
fm.allreduce([x, np.ones(2, np.float32)], fusion=np.array([1, 1]))
fm.register((x,), split_indices=[])
fm.mark_ready(0)
fm.wait()
fm.allgather(fm.reduce_scatter([x]), [x])
mesh = DeviceMesh((comm.size,), comm)
block = mesh.shard(np.arange(8.0), (0,))
mesh.redistribute(block, (0,), (None,), timeout=datetime.timedelta(seconds=30))
DataParallel([np.ones(3)], comm, accumulate=None).sync([np.ones(3)])
ShardedOptimizer([np.zeros(4)], sgd(0.1), comm).step([np.ones(4)])
pycoll.allreduce([1.0, 2.0])                # refused: a list
pycoll.allreduce(x, timeout="3")            # refused: a string
pycoll.broadcast(x, root="0")               # refused: a string
comm.reduce_scatter(x, out=5)               # refused: a number
pycoll.scatter(x, sizes=4)                  # refused: a number, not sizes
pycoll.alltoall(x, sizes=[4, 0])            # refused: a list of numbers, not a matrix
fm.allreduce(x)                             # refused: an array, not a list of them
fm.allreduce([x], fusion=[1.5])             # refused: a float id
pycoll.Communicator("world")                # refused: a string
DeviceMesh(4)                               # refused: a number, not a shape
mesh.shard(block, 0)                        # refused: a number, not placements
'''


def test_a_callers_accepted_code_runs(tmp_path):
    """What the annotations admit (the caller's lines before the first
    refused one) runs, on 2 ranks."""
    from mpirun import SENTINEL, launch
    accepted = _CALLER[:_CALLER.index("# refused")].rsplit("\n", 1)[0]
    caller = tmp_path / "caller.py"
    caller.write_text(accepted + "\nprint(f'PYCOLL-OK rank={comm.rank}')\n")
    proc = launch(2, [caller], timeout=120)
    ranks = sorted(int(r) for r in SENTINEL.findall(proc.stdout))
    assert proc.returncode == 0 and ranks == [0, 1], proc.stdout + proc.stderr


def test_a_callers_code_type_checks(tmp_path):
    """The annotations of the public API (pycoll/_typing.py) admit what
    pycoll takes at run time and refuse what it refuses. mypy is a
    developer's tool: without it this test skips."""
    api = pytest.importorskip("mypy.api")
    caller = tmp_path / "caller.py"
    caller.write_text(_CALLER)
    report, errors, status = api.run([
        "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent", str(caller)])
    flagged = sorted({int(m) for m in re.findall(r"caller\.py:(\d+): error", report)})
    refused = [i for i, line in enumerate(_CALLER.splitlines(), 1) if "# refused" in line]
    assert status == (1 if refused else 0) and flagged == refused, report + errors


def test_every_public_call_has_its_documentation():
    """help(comm.allreduce) shows pycoll.allreduce's docstring (the methods
    had none); every collective's shows what each rank holds."""
    import inspect
    for name in ALGORITHMS:
        function, method = getattr(pycoll, name), getattr(pycoll.Communicator, name)
        own = inspect.getdoc(function)
        assert own, name
        assert re.search(r"Example \(\d ranks\)::", own), f"{name}: no example"
        doc = inspect.getdoc(method)
        assert doc and doc.startswith(f"``comm.{name}(...)`` is ``pycoll.{name}(..., comm=comm)``")
        assert doc.endswith(own), name
    methods = [m for m, _ in inspect.getmembers(pycoll.Handle, inspect.isfunction)
               if not m.startswith("_")]
    assert "wait" in methods and all(inspect.getdoc(getattr(pycoll.Handle, m)) for m in methods), methods


def test_every_algorithm_module_has_the_interface():
    for collective, names in ALGORITHMS.items():
        for name in names:
            module = REGISTRY[collective][name]
            assert module.__name__.endswith(f"{collective}_{name}")
            doc = module.__doc__
            for term in ("steps", "bytes sent", "bytes reduced"):
                assert term in doc, f"{module.__name__} docstring lacks {term!r}"
            for p in range(1, 17):
                assert module.steps(p) >= 0
                assert module.bytes_on_wire(1000, p) >= 0
                assert module.reduce_bytes(1000, p) >= 0
            assert module.steps(1) == 0 and module.bytes_on_wire(1000, 1) == 0


@pytest.mark.parametrize("collective,name,p,steps,wire,reduced", [
    ("allreduce", "ring", 4, 6, 1500, 750),
    ("allreduce", "recursive_doubling", 8, 3, 3000, 3000),
    ("allreduce", "recursive_doubling", 6, 4, 3000, 3000),
    ("allreduce", "rabenseifner", 8, 6, 1750, 875),
    ("allreduce", "tree", 5, 6, 3000, 3000),
    ("broadcast", "binomial", 8, 3, 3000, 0),
    ("broadcast", "binomial", 3, 2, 1000, 0),
    ("broadcast", "binomial", 6, 3, 2000, 0),
    ("reduce_scatter", "ring", 4, 3, 3000, 3000),
    ("allgather", "bruck", 5, 3, 4000, 0),
    ("scatter", "linear", 4, 3, 1000, 0),
    ("scatter", "binomial", 4, 2, 3000, 0),
    ("barrier", "dissemination", 5, 3, 0, 0),
])
def test_cost_terms(collective, name, p, steps, wire, reduced):
    """The numbers the docstrings state, for n = 1000 bytes."""
    module = REGISTRY[collective][name]
    assert module.steps(p) == steps
    assert module.bytes_on_wire(1000, p) == pytest.approx(wire)
    assert module.reduce_bytes(1000, p) == pytest.approx(reduced)
