"""scatter, linear: the root sends each rank its block directly.

    steps          p - 1                  (the root's sends, all in flight at once)
    bytes sent     (p - 1) * n            (the root; n = one block)
    bytes reduced  0
"""


def steps(p):
    return p - 1


def bytes_on_wire(n, p):
    return (p - 1) * n


def reduce_bytes(n, p):
    return 0


def run(t):
    p, r, root, ch = t.size, t.rank, t.root, t.ch
    if r != root:
        ch.recv(t.out, root)
        return
    displs = t.displs
    sends = []
    for i in range(p):
        if i != root:
            sends += ch.isend(t.send[displs[i]:displs[i] + t.counts[i]], i)
    # the root's own block is copied while its sends are in flight
    t.out[:] = t.send[displs[root]:displs[root] + t.counts[root]]
    ch.wait(sends)
