"""The benchmark harness (nccl-tests' common.cu): CLI, sizes, timing, checks,
the table and the JSON. Each op's specifics live in ops.py.

    mpiexec -n 4 python -m pycoll.bench allreduce -b 8 -e 64M -f 4 -a native,ring,auto

For every size, each algorithm runs ``-w`` warm-up and ``-n`` timed
iterations after a barrier; the time is the largest over ranks of the mean
per iteration; algbw = size / time and busbw = algbw x the op's factor
(GB/s, 1 GB = 1e9 B). With ``-c 1`` every measurement is followed by one
checked call on fresh inputs and #wrong counts wrong elements over all
ranks. ``native`` runs mpi4py's own MPI collective in the same harness; a
"vs native" column gives each algorithm's busbw over native's.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import pycoll
from pycoll._dtypes import BY_NAME, Op, check_op, op_of
from pycoll.algorithms import ALGORITHMS
from pycoll.bench.ops import MEMORY, SPECS, Bench

OPS = list(SPECS)
# "all": the collectives nccl-tests has, whose busbw factors are its own
# conventions (DESIGN.md); scan, pycoll's own, runs by name.
ALL_OPS = [op for op in OPS if op != "scan"]
# "tuned": "auto" on a Communicator(autotune=True) (Note [Tuning online] in
# pycoll/_trials.py), for the collectives it tunes.
TUNED, TUNED_OPS = "tuned", ("allreduce", "reduce", "reduce_scatter")
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """Bytes from "8", "64K", "64M", "1G" (powers of 1024, as nccl-tests)."""
    given, text = text, text.strip().upper().removesuffix("B")
    unit = text[-1] if text and text[-1] in UNITS else ""
    try:
        value = int(text[:-1] if unit else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{given!r} is not a size like 8, 64K, 64M or 1G") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"size {value} is negative")
    return value * UNITS[unit]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pycoll.bench",
        description="Bus bandwidth of pycoll's collectives, nccl-tests style. Run under "
                    "mpiexec -n P. 'python -m pycoll.bench plot FILE.json -o busbw.png' draws "
                    "a JSON file.")
    parser.add_argument("op", choices=OPS + ["all"],
                        help="the collective, or all (nccl-tests' eight: all but scan)")
    parser.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("8"),
                        help="smallest size in bytes (K, M, G suffixes), default 8")
    parser.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("64M"),
                        help="largest size in bytes, default 64M")
    parser.add_argument("-f", "--stepfactor", type=int, default=2, help="size multiplier per step")
    parser.add_argument("-n", "--iters", type=int, default=20, help="timed iterations")
    parser.add_argument("-w", "--warmup_iters", type=int, default=5,
                        help="untimed iterations before the timed ones")
    parser.add_argument("-R", "--rounds", type=int, default=1,
                        help="interleave the algorithms: at each size, R rounds of n iterations "
                             "of each, time = the median round (for side-by-side ratios on a "
                             "noisy machine)")
    parser.add_argument("-T", "--round_us", type=float, default=0,
                        help="make every round last at least this many microseconds: at sizes "
                             "where n iterations of the fastest case take less (as timed in the "
                             "warm-up), more iterations, the same for every case and rank (small "
                             "messages are otherwise timed over a few microseconds)")
    parser.add_argument("-E", "--equal_counts", action="store_true",
                        help="with several dtypes (-d), time them at equal element counts, "
                             "taking turns within every round as the algorithms do: sizes are "
                             "the first dtype's bytes (for ratios between dtypes)")
    parser.add_argument("-M", "--memory", choices=tuple(MEMORY), default="numpy",
                        help="every case's buffers from numpy (their pages depend on what was "
                             "allocated before), from pycoll.empty (huge pages from 256 KiB), or "
                             "all on 4 KiB pages (Note [Huge pages] in pycoll/_memory.py)")
    parser.add_argument("-c", "--check", type=int, choices=(0, 1), default=1,
                        help="check every result (1) or not (0)")
    parser.add_argument("-d", "--datatype", default="float32",
                        help="dtype name(s), comma-separated, or all")
    parser.add_argument("-o", "--op", dest="redop", default="sum",
                        help="reduction op(s): sum, prod, max, min, avg, band, bor, bxor, "
                             "comma-separated, or all")
    parser.add_argument("-r", "--root", type=int, default=0,
                        help="the root of broadcast, reduce, gather and scatter")
    parser.add_argument("-a", "--algorithm", default="auto",
                        help="comma-separated: auto, native, all, algorithm names, or "
                             "tuned (auto with autotune=True; allreduce, reduce, "
                             "reduce_scatter)")
    parser.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    return parser


def parse_args(argv) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.stepfactor < 2:
        parser.error(f"-f {args.stepfactor}: the step factor must be at least 2")
    if args.iters < 1 or args.warmup_iters < 0 or args.rounds < 1 or args.round_us < 0:
        parser.error("-n and -R must be at least 1, -w and -T at least 0")
    if args.round_us and args.warmup_iters < 2:
        parser.error(f"-T needs -w 2 or more (the warm-up after the first call is timed), "
                     f"not -w {args.warmup_iters}")
    if args.minbytes > args.maxbytes:
        parser.error(f"-b {args.minbytes} is larger than -e {args.maxbytes}")
    args.ops = ALL_OPS if args.op == "all" else [args.op]
    names = list(BY_NAME) if args.datatype == "all" else args.datatype.split(",")
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"-d: unknown dtype {', '.join(unknown)}; expected all or {', '.join(BY_NAME)}")
    args.dtypes = [BY_NAME[n] for n in names]
    try:
        args.redops = list(Op) if args.redop == "all" else [op_of(o) for o in args.redop.split(",")]
    except (TypeError, ValueError) as exc:
        parser.error(f"-o: {exc}")
    if any(SPECS[op].reduces for op in args.ops):
        pairs = [(o, d) for o in args.redops for d in args.dtypes if _defined(o, d)]
        if not pairs:
            parser.error(f"-o {args.redop} is not defined for "
                         f"{', '.join(d.name for d in args.dtypes)}")
    algorithms = args.algorithm.split(",")
    for op in args.ops:
        known = set(ALGORITHMS[op]) | {"auto", "native", "all"} | tuned(op)
        bad = [a for a in algorithms if a not in known]
        if bad:
            parser.error(f"-a: {op} has no algorithm {', '.join(bad)}; expected auto, native, all, "
                         f"{TUNED + ', ' if tuned(op) else ''}or {', '.join(ALGORITHMS[op])}")
    args.algorithms = algorithms
    return args


def _defined(op: Op, dtype) -> bool:
    try:
        check_op(op, dtype)
    except TypeError:
        return False
    return True


def tuned(op: str) -> set:
    """{"tuned"} where *op* has it, else {}."""
    return {TUNED} if op in TUNED_OPS else set()


def algorithms_for(op: str, requested: list) -> list:
    """native first (the other rows are compared with it), then the rest;
    "all" is native, auto, tuned (where the op has it) and every algorithm."""
    names = []
    for a in requested:
        names += ["native", "auto", *tuned(op), *ALGORITHMS[op]] if a == "all" else [a]
    names = list(dict.fromkeys(names))
    return sorted(names, key=lambda a: a != "native")


def sizes(lo: int, hi: int, factor: int) -> list:
    out, size = [], max(lo, 1) if lo else 0
    if lo == 0:
        out.append(0)
        size = 1
    while size <= hi:
        out.append(size)
        size *= factor
    return out


def memory_available() -> int:
    """Bytes this machine can still give (MemAvailable), or 0 if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def bytes_needed(args, p: int) -> int:
    """A generous estimate of what the largest size needs on this machine:
    send, receive and expected buffers plus pycoll's scratch, on p ranks."""
    worst = 0
    for op in args.ops:
        spec = SPECS[op]
        for dtype in args.dtypes:
            count = spec.blocks(args.maxbytes, dtype.itemsize, p)
            send, recv = spec.elements(count, p)
            nbytes = (send + recv) * dtype.itemsize
            worst = max(worst, 2 * nbytes + 2 * max(send, recv) * dtype.itemsize)
    return worst * p


class Table:
    """nccl-tests' table, printed by rank 0 row by row.

    A row is the case (size, count, type, redop, root, algorithm) and two
    column groups, out-of-place and in-place: time, algbw, busbw, #wrong and
    the ratio of busbw to native's.
    """

    CASE = [("size", "(B)", 12), ("count", "(elements)", 11), ("type", "", 11), ("redop", "", 6),
            ("root", "", 5), ("algorithm", "", 19)]
    GROUP = [("time", "(us)", 10), ("algbw", "(GB/s)", 7), ("busbw", "(GB/s)", 7),
             ("#wrong", "", 7), ("vs native", "", 10)]

    def __init__(self, rank: int):
        self.rank = rank
        self.case_width = sum(w for _, _, w in self.CASE) + 1
        self.group_width = sum(w for _, _, w in self.GROUP) + 2

    def print(self, text: str = "") -> None:
        if self.rank == 0:
            print(text, flush=True)

    def header(self, title: str) -> None:
        self.print(f"#\n# {title}")
        self.print("#" + " " * (self.case_width - 1) + "out-of-place".center(self.group_width)
                   + "in-place".center(self.group_width))
        for line in (0, 1):
            text = "".join(f"{col[line]:>{w}}" for *col, w in self.CASE)
            group = "".join(f"{col[line]:>{w}}" for *col, w in self.GROUP)
            self.print("#" + text[1:] + " " + "  " + group + "  " + group)

    def row(self, size, count, dtype, redop, root, algorithm, cells) -> None:
        values = (size, count, dtype, redop, root, algorithm)
        text = "".join(f"{v:>{w}}" for v, (_, _, w) in zip(values, self.CASE))
        self.print(text + " " + "".join("  " + c for c in cells))


def cell(measured, native=None) -> str:
    """One column group: time, algbw, busbw, #wrong, vs native."""
    widths = [w for _, _, w in Table.GROUP]
    if measured is None:
        return f"{'n/a':>{widths[0]}}" + " " * sum(widths[1:])
    t, algbw, busbw, wrong = measured[:4]
    ratio = f"{busbw / native[2]:.2f}" if native and native[2] > 0 else "-"
    return (f"{t * 1e6:>{widths[0]}.2f}{algbw:>{widths[1]}.2f}{busbw:>{widths[2]}.2f}"
            f"{wrong:>{widths[3]}d}{ratio:>{widths[4]}}")


def json_problem(path: str) -> str | None:
    """Why *path* cannot be written, or None."""
    target = Path(path)
    if target.is_dir():
        return "is a directory"
    if target.exists():
        return None if os.access(target, os.W_OK) else "is not writable"
    folder = target.parent
    if not folder.is_dir():
        return f"no directory {str(folder)!r}"
    return None if os.access(folder, os.W_OK | os.X_OK) else f"directory {str(folder)!r} is not writable"


def refusal(args, p: int, rank: int, native) -> str | None:
    """Why the run cannot go ahead (the same on every rank), or None:
    a root out of range, more memory than the machine has, a --json path
    rank 0 cannot write (refused now, not after the whole sweep)."""
    if not 0 <= args.root < p:
        return f"-r {args.root} is out of range for {p} ranks"
    needed, available = bytes_needed(args, p), memory_available() if rank == 0 else 0
    available = native.bcast(available, root=0)
    if available and needed > available:
        return (f"-e {args.maxbytes} needs about {needed} bytes on {p} ranks, more than the "
                f"{available} bytes available")
    unwritable = native.bcast(json_problem(args.json) if rank == 0 and args.json else None)
    if unwritable:
        return f"--json {args.json}: {unwritable}"
    return None


def run(args) -> int:
    from mpi4py import MPI

    comm = pycoll.Communicator()
    # Creation is collective: every rank has the same arguments.
    wanted = any(TUNED in algorithms_for(op, args.algorithms) for op in args.ops)
    tuned_comm = pycoll.Communicator(autotune=True) if wanted else None
    native = MPI.COMM_WORLD.Dup()          # native collectives and the harness's own sync
    try:
        problem = refusal(args, comm.size, comm.rank, native)
        if problem:
            if comm.rank == 0:
                print(f"python -m pycoll.bench: error: {problem}", file=sys.stderr)
            return 2
        return sweep(args, comm, tuned_comm, native, MPI)
    finally:
        native.Free()
        comm.free()
        if tuned_comm is not None:
            tuned_comm.free()


def sweep(args, comm, tuned_comm, native, MPI) -> int:
    """Every (op, dtype group, redop, size) of *args*: the table on rank
    0's stdout, --json at the end; 1 when a result was wrong."""
    p, rank = comm.size, comm.rank
    table = Table(rank)
    # Open MPI's version string ends in a NUL byte.
    library = " ".join(MPI.Get_library_version().replace("\0", "").strip().splitlines()[0].split())
    meta = {"mpi": library, "p": p, "pycoll": pycoll.__version__,
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "mpi4py": __import__("mpi4py").__version__, "iters": args.iters,
            "warmup": args.warmup_iters, "rounds": args.rounds, "round_us": args.round_us,
            "memory": args.memory, "command": "python -m pycoll.bench " + " ".join(sys.argv[1:])}
    table.print(f"# pycoll {pycoll.__version__} benchmark on {p} ranks, {library}, "
                f"mpi4py {meta['mpi4py']}")
    table.print(f"# dtype {','.join(d.name for d in args.dtypes)}  iters {args.iters}  warmup "
                f"{args.warmup_iters}  check {args.check}  memory {args.memory}  {meta['date']}")
    rows, rounded = [], False
    groups = [args.dtypes] if args.equal_counts else [[d] for d in args.dtypes]
    for op in args.ops:
        spec = SPECS[op]
        for group in groups:
            for redop in (args.redops if spec.reduces else [None]):
                dtypes = []
                for dtype in group:
                    try:
                        if redop is not None:
                            check_op(redop, dtype)
                        dtypes.append(dtype)
                    except TypeError as exc:
                        table.print(f"#\n# {op} {dtype.name}: skipped, {exc}")
                if dtypes:
                    more, cut = sweep_sizes(table, args, op, group[0], dtypes, redop, comm,
                                            tuned_comm, native, MPI)
                    rows += more
                    rounded |= cut
    wrong = sum(r["wrong"] for r in rows)
    if rounded:
        table.print("# Sizes that do not divide into whole elements (and, for ops that cut the "
                    "data into p blocks, into p blocks) were rounded down, as nccl-tests does.")
    table.print(f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}")
    average = sum(r["busbw"] for r in rows) / len(rows) if rows else 0.0
    table.print(f"# Avg bus bandwidth    : {average:.4f}")
    table.print("#")
    if args.json and rank == 0:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0 if wrong == 0 else 1


def sweep_sizes(table, args, op: str, first, dtypes: list, redop, comm, tuned_comm, native,
                MPI) -> tuple:
    """(JSON rows, whether a size was rounded down) of one op, dtype group
    and redop at every size; *first*, the group's first dtype, sets the
    element count (-E)."""
    spec, p, rank = SPECS[op], comm.size, comm.rank
    algorithms = algorithms_for(op, args.algorithms)
    root = args.root if spec.rooted else -1
    redop_name = redop.value if redop is not None else "none"
    table.header(f"{op}  {','.join(d.name for d in dtypes)}  {redop_name}  "
                 f"root {root}  busbw factor {spec.factor(p):.3f}"
                 + ("  (equal counts)" if args.equal_counts else ""))
    rows, rounded = [], False
    for size in sizes(args.minbytes, args.maxbytes, args.stepfactor):
        count = spec.blocks(size, first.itemsize, p)
        benches = {}
        for dtype in dtypes:
            actual = spec.size(count, dtype.itemsize, p)
            rounded |= actual != size and dtype is first
            bench = Bench(spec, dtype.numpy, count, p, rank, max(root, 0),
                          redop or Op.SUM, memory=args.memory)
            expected = spec.expected(bench) if args.check else None
            benches[dtype.name] = (bench, expected, actual)
        cases = [(d.name, a, inplace) for d in dtypes for a in algorithms
                 for inplace in (False, True) if not inplace or spec.has_inplace]
        results = measure_all(spec, benches, cases, comm, native, MPI, args, tuned_comm)
        for dtype in dtypes:
            case = {"op": op, "dtype": dtype.name, "redop": redop_name,
                    "root": root, "size": benches[dtype.name][2], "count": count}
            rows += report(table, spec, case, algorithms, results)
    return rows, rounded


def report(table, spec, case: dict, algorithms, results) -> list:
    """Print one dtype's rows at one size (out of place and in place, each
    against native's busbw) and return them as JSON rows. case: op, dtype,
    redop, root, size and count; results: measure_all's."""
    rows, native = [], {}
    for algorithm in algorithms:
        cells = []
        for inplace in (False, True):
            if inplace and not spec.has_inplace:
                cells.append(cell(None))
                continue
            m = results[(case["dtype"], algorithm, inplace)]
            if algorithm == "native":
                native[inplace] = m
            cells.append(cell(m, native.get(inplace)))
            if m is not None:
                t, algbw, busbw, wrong, iters, *chosen = m
                rows.append({**case, "algorithm": algorithm, "inplace": inplace,
                             "time_us": t * 1e6, "algbw": algbw, "busbw": busbw,
                             "wrong": wrong, "iters": iters,
                             **({"chosen": chosen[0]} if chosen else {})})
        table.row(case["size"], case["count"], case["dtype"], case["redop"], case["root"],
                  algorithm, cells)
    return rows


MAX_ITERS = 100_000


def balanced_order(n: int, k: int) -> list:
    """Round k's order of n cases: row k of a balanced Latin square
    (Williams' design). Over n rounds (2n when n is odd) every case takes
    every place once (twice), and directly follows every other case equally
    often. A case timed right after a larger one pays for that one's sweep
    through the caches: with -E and the order float32, float16, bfloat16
    kept fixed, whichever half type came second took 1.4-2x its time in
    third place (1M elements, MPICH, p = 2: float16 317-373 us second,
    207-262 third; bfloat16 393-401 and 173-223); rotating that order
    every round keeps float16 after float32 and kept float16 1.2-1.35x
    bfloat16's time. The first row is 0, 1, n-1, 2, n-2, ...; row k adds k
    to each entry (mod n), reversed in every other block of n rows when n
    is odd."""
    first = [0 if i == 0 else (i + 1) // 2 if i % 2 else n - i // 2 for i in range(n)]
    row = [(c + k) % n for c in first]
    if n % 2 and (k // n) % 2:
        row.reverse()
    return row


def settle(comm, call, limit: int = 10_000) -> int:
    """Make *call* until *comm*'s tuner has decided every signature it has
    seen, so that "tuned" is timed on its choice rather than on its trials
    (Note [Tuning online] in pycoll/_trials.py); the number of calls made.
    The decisions are agreed, so every rank stops at the same call."""
    made = 0
    while None in comm.autotune_choices().values() and made < limit:
        call()
        made += 1
    return made


def tuned_choice(comm, op: str, send) -> str | None:
    """The algorithm *comm*'s tuner chose for *op* on *send* (its last
    decision for that dtype and shape: in place or not, the call signature
    is the same)."""
    chosen = [c for key, c in comm.autotune_choices().items()
              if key[:3] == (op, send.dtype, send.shape)]
    return chosen[-1] if chosen else None


def measure_all(spec, benches, cases, comm, native, MPI, args, tuned_comm=None) -> dict:
    """{(dtype name, algorithm, inplace): (time s, algbw, busbw, #wrong,
    iterations per round) or None} at one size. benches maps a dtype name
    to (Bench, expected result, bytes). Each case is warmed up, then timed
    over args.rounds rounds of args.iters iterations (more with -T, where
    the fastest case's take under args.round_us; as many in every case),
    the cases taking turns within every round; its time is the median round
    (the largest over ranks of the mean iteration). "tuned" runs "auto" on
    *tuned_comm*, warmed up until its tuner has chosen (settle); its tuple
    has a sixth item, the algorithm chosen.

    Round k takes the turns in the order of balanced_order(n, k), so that
    every case follows every other one equally often: a case timed right
    after a larger one pays for that one's sweep through the caches.

    Note [Equal rounds]: every round starts with fill(), and the call
    after it is the slow one (its input was just rewritten: bench/NOTES.md,
    "What was tried on the model"), so a round's mean depends on how many
    calls share that cost. Until 2026-11-26 -T gave each case the calls
    its own warm-up asked for, and the first case at each size to use a
    plan ("auto", listed before the algorithm it runs) warmed up through
    the plan's first calls, which try every way of sending (Note [Choosing
    the way] in pycoll/_resources.pyx): on MPICH at p = 2 its rounds held 4
    calls at 1 MiB against the same algorithm's 13-16 under its own name,
    and "auto" read 1.02-1.24x that algorithm's time (median 1.13) in the
    nine launches of reduce, allgather and broadcast of a report made
    then (bench/NOTES.md, "Rounds"). So every case takes the number of
    calls the fastest one needs to fill args.round_us."""
    calls: dict = {}
    for case in cases:
        name, algorithm, inplace = case
        bench = benches[name][0]
        if algorithm == "native":
            if not spec.native_supported(bench.dtype, bench.redop):
                continue
            calls[case] = (bench, lambda bench=bench, inplace=inplace:
                           spec.native(bench, native, MPI, inplace))
        else:
            on, name = (tuned_comm, "auto") if algorithm == TUNED else (comm, algorithm)
            calls[case] = (bench, lambda bench=bench, on=on, name=name, inplace=inplace:
                           spec.run(bench, on, name, inplace))
    times: dict = {case: [] for case in calls}
    fastest = math.inf                      # the lowest warm-up time of a call, s
    for case, (bench, call) in calls.items():
        bench.fill()
        if args.warmup_iters:
            call()                          # the first call makes the plan: not timed
        if case[1] == TUNED:
            settle(tuned_comm, call)
        start = time.perf_counter()
        for _ in range(args.warmup_iters - 1):
            call()
        if args.round_us:
            # Every rank must make the same calls: the slowest rank's estimate.
            fastest = min(fastest, native.allreduce(
                (time.perf_counter() - start) / (args.warmup_iters - 1), op=MPI.MAX))
    # Every case makes the same number of calls per round: the first call
    # after fill() is the slow one, and it must weigh the same in each
    # case's mean (Note [Equal rounds]).
    iters = args.iters
    if args.round_us and calls:
        iters = max(iters, min(MAX_ITERS, math.ceil(args.round_us * 1e-6 / max(fastest, 1e-9))))
    turns = list(calls.items())
    for k in range(args.rounds):
        for i in balanced_order(len(turns), k):
            case, (bench, call) = turns[i]
            bench.fill()
            native.Barrier()
            start = time.perf_counter()
            for _ in range(iters):
                call()
            elapsed = (time.perf_counter() - start) / iters
            times[case].append(native.allreduce(elapsed, op=MPI.MAX))
    results: dict = {case: None for case in cases}
    for case, (bench, call) in calls.items():
        _, expected, size = benches[case[0]]
        elapsed = statistics.median(times[case])
        wrong = 0
        if args.check:
            bench.fill()
            call()
            got = spec.result(bench, case[2])
            if got is not None:
                wrong = int(np.count_nonzero(got != expected))
            wrong = native.allreduce(wrong, op=MPI.SUM)
        algbw = size / elapsed / 1e9 if elapsed > 0 else 0.0
        results[case] = (elapsed, algbw, algbw * spec.factor(bench.p), wrong, iters)
        if case[1] == TUNED:
            results[case] += (tuned_choice(tuned_comm, spec.name, bench.send),)
    return results


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["plot"]:
        from pycoll.bench.plot import main as plot_main
        return plot_main(argv[1:])
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
