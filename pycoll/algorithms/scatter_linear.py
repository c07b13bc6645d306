"""scatter, linear: the root sends each rank its block directly.

    steps          p - 1                  (the root's sends, all in flight at once)
    bytes sent     n                      (n = one block; as gather_linear)
    bytes reduced  0

The root sends (p - 1) * n bytes, but its receivers copy their blocks at
once, so the time grows with one block (Note [Scatter's terms] in
pycoll/tuning.py).
"""


def steps(p):
    return p - 1


def bytes_on_wire(n, p):
    return n if p > 1 else 0


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
