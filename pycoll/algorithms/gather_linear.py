"""gather, linear: every rank sends its block straight to the root, which
posts all p - 1 receives at once.

    steps          p - 1                  (the root's receives)
    bytes sent     n                      (n = one block)
    bytes reduced  0
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
        ch.send(t.send, root)
        return
    displs = t.displs
    transfers = []
    for i in range(p):
        block = t.out[displs[i]:displs[i] + t.counts[i]]
        if i == root:
            block[:] = t.send
        else:
            transfers.append((block, i))
    ch.wait(ch.irecv_each(transfers))
