"""reduce, Rabenseifner: recursive-halving reduce-scatter, then a binomial
gather of the blocks to the root.

The reduce-scatter is allreduce_rabenseifner's (pof2 blocks, virtual rank v
ends with block v). The gather runs on virtual ranks numbered by XOR with
the root's virtual rank: in round k a rank whose relative bit k is set sends
its aligned range of 2^k blocks to the partner 2^k away and stops, so each
message is one contiguous range. A process count that is not a power of two
is folded; if the root itself sat out, its partner passes it the result.

    steps          2 log2(pof2) + 1 or 2 if p is not a power of two
    bytes sent     2 (pof2 - 1)/pof2 * n + n if p is not a power of two
    bytes reduced  (pof2 - 1)/pof2 * n + n if p is not a power of two
"""
from pycoll.algorithms._shape import Fold, element_blocks
from pycoll.algorithms.allreduce_rabenseifner import halving_reduce_scatter, view


def steps(p):
    fold = Fold(p)
    return 2 * (fold.pof2.bit_length() - 1) + (2 if fold.rem else 0)


def bytes_on_wire(n, p):
    fold = Fold(p)
    return 2 * (fold.pof2 - 1) * n / fold.pof2 + (n if fold.rem else 0)


def reduce_bytes(n, p):
    fold = Fold(p)
    return (fold.pof2 - 1) * n / fold.pof2 + (n if fold.rem else 0)


def run(t):
    p, r, root, ch, send, data = t.size, t.rank, t.root, t.ch, t.send, t.data
    fold = Fold.of(p)
    v = fold.virtual(r)
    root_v = fold.virtual(root)
    root_sits_out = root_v is None
    if root_sits_out:
        root_v = fold.virtual(root + 1)
    mine = send
    if r < 2 * fold.rem:
        if v is None:
            ch.send(send, r + 1)
            if r == root:
                ch.recv(data, r + 1)
            return
        ch.recv_reduce(send, r - 1, received_left=True, out=data)
        mine = data
    blocks = element_blocks(len(data), t.itemsize, fold.pof2)
    if halving_reduce_scatter(ch, mine, data, blocks, fold, v, r) is not data:
        data[:] = mine                          # p == 1
    # Gather the blocks to root_v over aligned, doubling ranges.
    rel = v ^ root_v
    mask = 1
    while mask < fold.pof2:
        partner = fold.real(v ^ mask)
        if rel & mask:
            mine = v & ~(mask - 1)
            ch.send(view(data, blocks, mine, mine + mask), partner)
            return
        theirs = (v ^ mask) & ~(mask - 1)
        ch.recv(view(data, blocks, theirs, theirs + mask), partner)
        mask <<= 1
    if root_sits_out:
        ch.send(data, root)
