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
        block = t.send[displs[i]:displs[i] + t.counts[i]]
        if i == root:
            t.out[:] = block
        else:
            sends += ch.isend(block, i)
    ch.wait(sends)
