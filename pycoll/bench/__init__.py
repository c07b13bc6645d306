"""pycoll's benchmark: bus bandwidth of each collective, nccl-tests style.

    mpiexec -n 4 python -m pycoll.bench allreduce -b 8 -e 64M -f 2 -a native,auto
    python -m pycoll.bench plot results.json -o busbw.png

See harness.py for the flags and the table, ops.py for the collectives.
"""
