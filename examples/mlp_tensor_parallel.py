"""Data and tensor parallel training of the numpy MLP with pycoll.layout (float64).

    mpiexec -n 4 python examples/mlp_tensor_parallel.py

The ranks form a (P / T, T) mesh, T = 2 when P is even (else 1): mesh
dimension 0 splits the batch (data parallel), mesh dimension 1 the hidden
layer (tensor parallel, as Megatron-LM splits an MLP). Each parameter and
activation has a layout (pycoll.layout: one placement per mesh
dimension):

    x        (batch, features)    (0, None)      rows by data rank
    w1, b1   (features, hidden)   (None, 1)      columns by tensor rank
    h        (batch, hidden)      (0, 1)
    w2       (hidden, classes)    (None, 0)      rows by tensor rank
    h @ w2   (batch, classes)     (0, "partial") -> (0, None): an allreduce
                                                 over the tensor ranks
    a gradient of w1 or w2 is "partial" over the data ranks -> None:
    an allreduce over them (the data-parallel gradient sum)

The per-step losses match single-process full-batch training to within
1e-9 (relative), which the script checks (exit status 1 otherwise).
"""
import sys

import numpy as np

import pycoll
from pycoll.layout import PARTIAL, DeviceMesh
from pycoll.parallel import sgd

from _mlp import dataset, init_params, reference, report, softmax_loss

STEPS, LR, MOMENTUM = 50, 0.5, 0.9
# Each parameter's layout on the (data, tensor) mesh, in init_params' order.
LAYOUTS = [(None, 1), (None, 0), (None, 0), (None, None)]     # w1, b1, w2, b2


def loss_and_grads(mesh, params, x, labels, total: int):
    """The forward and backward passes of _mlp.loss_and_grads on this
    rank's blocks: (the loss, summed over all ranks' samples / total; the
    gradients of this rank's parameter blocks, summed over the data ranks)."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)                                  # (0, 1)
    logits = mesh.redistribute(h @ w2, (0, PARTIAL), (0, None)) + b2
    loss, d_logits = softmax_loss(logits, labels, total)
    d_h = (d_logits @ w2.T) * (1.0 - h * h)                   # (0, 1): no message
    # Each rank's gradients cover its samples only: partial over the data ranks.
    partial = [(x.T @ d_h, (PARTIAL, 1)), (d_h.sum(axis=0), (PARTIAL, 0)),
               (h.T @ d_logits, (PARTIAL, 0)), (d_logits.sum(axis=0), (PARTIAL, None))]
    grads = [mesh.redistribute(g, src, (None, src[1])) for g, src in partial]
    loss = mesh.redistribute(np.array([loss]), (PARTIAL, None), (None, None))[0]
    return float(loss), grads


def main() -> int:
    comm = pycoll.Communicator()
    tensor = 2 if comm.size % 2 == 0 else 1
    mesh = DeviceMesh((comm.size // tensor, tensor), comm)
    x, labels = dataset()
    total = len(x)
    # dataset and init_params are seeded: every rank takes its blocks of the same values.
    params = [mesh.shard(w, layout) for w, layout in zip(init_params(), LAYOUTS)]
    x, labels = mesh.shard(x, (0, None)), mesh.shard(labels, (0, None))
    update, state = sgd(LR, MOMENTUM), {}
    losses = []
    for _ in range(STEPS):
        loss, grads = loss_and_grads(mesh, params, x, labels, total)
        losses.append(loss)
        update(params, grads, state)
    status = report(comm, losses, reference(STEPS, sgd(LR, MOMENTUM)),
                    f"data x tensor parallel MLP, mesh {mesh.shape}")
    mesh.free()
    comm.free()
    return status


if __name__ == "__main__":
    sys.exit(main())
