"""torch.distributed on pycoll: DDP communication hooks (needs torch).

    import pycoll, pycoll.contrib.torch as pt
    pt.init_process_group("gloo")                   # ranks and rendezvous from MPI
    model = torch.nn.parallel.DistributedDataParallel(net)
    model.register_comm_hook(pycoll.Communicator(), pt.allreduce_hook)
    # or, gradients sent as bfloat16 and summed in float32:
    model.register_comm_hook(pycoll.Communicator(), pt.compressed_allreduce_hook(torch.bfloat16))

DDP hands each bucket of gradients (a flat CPU tensor) to the hook, which
averages it over the ranks with pycoll and returns a torch Future. The
allreduce is asynchronous (the communicator's progress thread), so it
overlaps the rest of the backward pass as DDP's own allreduces do; the
Future completes from the progress thread (or from a thread that waits
on a later call, Note [Waiting runs the queue] in pycoll/_async.py). The
hook's *state* is a pycoll.Communicator, an mpi4py communicator, or None for COMM_WORLD. It
replaces DDP's communication whatever the process group's backend: the
process group still runs DDP's set-up (the parameter broadcast), pycoll the
gradients.

Only CPU tensors: pycoll moves host memory.

(No ``from __future__ import annotations`` here: DDP checks that a hook's
return annotation is torch.futures.Future[torch.Tensor] itself.)
"""
import socket

import torch
import torch.distributed as dist

from pycoll import api
from pycoll._dtypes import Op

__all__ = ["allreduce_hook", "compressed_allreduce_hook", "init_process_group"]


def init_process_group(backend: str = "gloo", comm=None, **kwargs) -> None:
    """``torch.distributed.init_process_group`` with rank, world size and
    rendezvous from MPI (under mpiexec there is no torchrun to set
    MASTER_ADDR and friends): rank 0 opens a free TCP port and tells the
    others. *comm*: a pycoll.Communicator, an mpi4py communicator or None."""
    c = api._comm_of(comm)
    mpi_comm = c._live()
    if c.rank == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        address = (socket.gethostname(), port)
    else:
        address = None
    host, port = mpi_comm.bcast(address, root=0)
    dist.init_process_group(backend, init_method=f"tcp://{host}:{port}", rank=c.rank,
                            world_size=c.size, **kwargs)


def allreduce_hook(state, bucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket's gradients averaged over the ranks
    (as DDP's default hook), in place, by pycoll."""
    tensor = bucket.buffer()
    return _average(api._comm_of(state), tensor, tensor, None)


def compressed_allreduce_hook(dtype=torch.bfloat16):
    """A DDP communication hook that sends the gradients as *dtype*
    (torch.bfloat16 or torch.float16: half the bytes of float32) and sums
    them in float32 (pycoll's accumulate="float32"), rounding once: fewer
    rounding errors than torch's fp16/bf16 compress hooks, which sum in the
    compressed dtype."""
    if dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")

    def hook(state, bucket) -> torch.futures.Future[torch.Tensor]:
        tensor = bucket.buffer()
        compressed = tensor.to(dtype)
        return _average(api._comm_of(state), compressed, tensor, "float32")
    hook.__name__ = hook.__qualname__ = f"compressed_allreduce_hook_{str(dtype).split('.')[-1]}"
    return hook


def _average(comm, tensor, into, accumulate) -> "torch.futures.Future[torch.Tensor]":
    """Average *tensor* over the ranks in place, asynchronously; the Future
    completes with *into* (tensor's values copied in when it is another
    tensor)."""
    future: torch.futures.Future = torch.futures.Future()
    handle = api.allreduce(tensor, Op.AVG, comm, out=tensor, accumulate=accumulate, async_op=True)

    def done(h):
        try:
            h.wait()
            if into is not tensor:
                into.copy_(tensor)
        except BaseException as exc:     # handed to DDP through the Future
            future.set_exception(exc)
        else:
            future.set_result(into)
    handle.add_done_callback(done)
    return future
