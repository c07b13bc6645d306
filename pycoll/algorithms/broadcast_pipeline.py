"""broadcast, pipeline: a segmented chain root -> root+1 -> ... -> root-1.

Each rank forwards a segment to the next rank as soon as it has arrived,
so for m segments the last byte lands after p - 2 + m segment times instead
of (p - 1) * m: the choice for large messages on few ranks.

    steps          p - 1 (plus one per extra segment, pipelined)
    bytes sent     n (the limit of many segments; m of them take p - 2 + m
                   segment times: Note [Pipelined chains] in pycoll/tuning.py)
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
    rel = (r - root) % p
    after = (r + 1) % p if rel < p - 1 else None
    if rel == 0:
        if after is not None:
            ch.send(t.data, after)
    else:
        ch.recv_copy_send(t.data, (r - 1) % p, after)
