"""Data-parallel training of a numpy MLP with pycoll (float64).

    mpiexec -n 4 python examples/mlp_data_parallel.py

Every rank holds the whole model and 1/P of the batch; after each backward
pass pycoll.parallel.DataParallel sums the ranks' gradients (one fused
allreduce) and every rank applies the same SGD step. The per-step losses
match single-process full-batch training to within 1e-9 (relative), which
the script checks (exit status 1 otherwise).
"""
import sys

import numpy as np

import pycoll
from pycoll.parallel import DataParallel, sgd

from _mlp import dataset, init_params, loss_and_grads, reference, report

STEPS, LR, MOMENTUM = 50, 0.5, 0.9


def main() -> int:
    comm = pycoll.Communicator()
    x, labels = dataset()
    params = init_params()
    # Each rank's loss is its samples' losses summed and divided by the
    # global batch size, so the gradients are summed (mean=False): exact for
    # any number of ranks, even when the batch does not split evenly.
    dp = DataParallel(params, comm, mean=False)
    update, state = sgd(LR, MOMENTUM), {}
    losses = []
    for _ in range(STEPS):
        loss, grads = loss_and_grads(params, dp.shard(x), dp.shard(labels), len(x))
        dp.sync(grads)
        losses.append(float(pycoll.allreduce(np.array([loss]), comm=comm)[0]))
        update(params, grads, state)
    status = report(comm, losses, reference(STEPS, sgd(LR, MOMENTUM)), "data-parallel MLP")
    comm.free()
    return status


if __name__ == "__main__":
    sys.exit(main())
