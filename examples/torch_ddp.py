"""torch DistributedDataParallel with pycoll's communication hook.

    mpiexec -n 2 python examples/torch_ddp.py

The process group (gloo) comes up from MPI (pycoll.contrib.torch.
init_process_group: no torchrun needed); DDP broadcasts the initial
parameters through it, and pycoll averages every gradient bucket
(allreduce_hook). A float64 model on 1/P of each batch: the per-step
losses match single-process full-batch training to within 1e-9 relative.
Then the same with compressed_allreduce_hook(torch.bfloat16), which sends
half the bytes and stays close (checked to 1e-2).
"""
import sys

import torch

import pycoll
import pycoll.contrib.torch as pt

STEPS, SAMPLES, FEATURES, HIDDEN, CLASSES = 30, 240, 20, 32, 3


def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, FEATURES, generator=g, dtype=torch.float64)
    y = torch.argmax(x @ torch.randn(FEATURES, CLASSES, generator=g, dtype=torch.float64), dim=1)
    return x, y


def model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, CLASSES)).double()


def train(net, x, y, steps):
    """Per-step mean losses over the global batch (SGD with momentum)."""
    opt = torch.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def main() -> int:
    comm = pycoll.Communicator()
    p, r = comm.size, comm.rank
    pt.init_process_group("gloo", comm)
    x, y = data()
    shard = slice(r * SAMPLES // p, (r + 1) * SAMPLES // p)    # equal shards: p divides SAMPLES
    expected = train(model(), x, y, STEPS)
    status = 0
    for name, hook, tolerance in [("allreduce_hook", pt.allreduce_hook, 1e-9),
                                  ("compressed_allreduce_hook(bfloat16)",
                                   pt.compressed_allreduce_hook(torch.bfloat16), 1e-2)]:
        ddp = torch.nn.parallel.DistributedDataParallel(model())
        ddp.register_comm_hook(comm, hook)
        local = train(ddp, x[shard], y[shard], STEPS)
        # the global loss: the mean of the ranks' equal-sized shard means
        losses = [float(v) for v in pycoll.allreduce(torch.stack(local), op=pycoll.AVG, comm=comm)]
        worst = max(abs(a - float(b)) / abs(float(b)) for a, b in zip(losses, expected))
        ok = worst <= tolerance
        status |= not ok
        if r == 0:
            print(f"DDP + pycoll {name} on {p} ranks: loss {losses[0]:.6f} -> {losses[-1]:.6f}; "
                  f"largest relative difference from single-process training {worst:.2e} "
                  f"({'OK' if ok else 'FAILED'}, tolerance {tolerance:g})", flush=True)
    torch.distributed.destroy_process_group()
    comm.free()
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
