"""alltoall, pairwise exchange: in step k = 1 .. p-1 rank r sends its block
for rank r + k and receives rank r - k's block for it, one partner at a time
(so every link carries one message per step).

    steps          p - 1
    bytes sent     (p - 1) * n            (n = one block)
    bytes reduced  0
"""
from pycoll.algorithms._shape import blocks_from_counts


def steps(p):
    return p - 1


def bytes_on_wire(n, p):
    return (p - 1) * n


def reduce_bytes(n, p):
    return 0


def run(t):
    p, r, ch = t.size, t.rank, t.ch
    send = blocks_from_counts(t.counts)
    # every rank's block for r has r's own size, unless sizes= says otherwise
    receive = blocks_from_counts(t.recv_counts or (t.counts[r],) * p)

    def outgoing(i):
        lo, n = send[i]
        return t.send[lo:lo + n]

    def incoming(i):
        lo, n = receive[i]
        return t.out[lo:lo + n]

    incoming(r)[:] = outgoing(r)
    for k in range(1, p):
        dest, source = (r + k) % p, (r - k) % p
        ch.sendrecv(outgoing(dest), dest, incoming(source), source)
