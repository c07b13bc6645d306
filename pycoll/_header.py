"""The header of broadcast and scatter: what a rank passing x=None learns.

A rank that passes ``x=None`` to broadcast or scatter learns the root's
dtype and shape from a header the root sends down the binomial tree on a
tag of its own, before any data. The header is one word of 8 int64
(``make_word``: status, dtype code, ndim, up to SHORT_DIMS dimensions);
an error on the root, or more dimensions, follows as JSON
(``broadcast_json``), so every rank raises the root's error. Small data
rides in the header's message (HEADER_INLINE): a broadcast's whole
(``inline_broadcast``), a scatter's blocks (Note [Inline scatter]).

The same JSON broadcast carries rank 0's settings when a Communicator is
made (api._agree_settings). The C lanes (pycoll/_lane_move.pyx:
BroadcastLane, ScatterRoot, ScatterReceiver) send and match the same
words.
"""
from __future__ import annotations

import json
import math

import numpy as np

from pycoll import _message
from pycoll._dtypes import BY_CODE, BY_NAME, DType
from pycoll._p2p import Channel
from pycoll._plan import _scatter_plan, _split_counts
from pycoll.algorithms._shape import binomial_subtree
from pycoll.algorithms.broadcast_binomial import binomial_broadcast, binomial_edges

HEADER_BYTES = 2048       # a long header (an error, many dimensions) for x=None ranks
SHORT_DIMS = 5             # the binary header holds up to this many dimensions
HEADER_OK, HEADER_LONG, HEADER_INLINE = 1, 2, 3
WORD_BYTES = 64            # the header word: 8 int64
# A broadcast of at most INLINE_BYTES on a tree carries its data in the
# header's message (HEADER_INLINE): one message per edge instead of two.
# Word and data then stay within 4 KiB, Open MPI's shared-memory eager limit
# (btl_sm_eager_limit; MPICH's is larger), above which a message waits for
# its receiver anyway.
INLINE_BYTES = 4096 - WORD_BYTES

CARRIED_ERRORS = {"TypeError": TypeError, "ValueError": ValueError, "RuntimeError": RuntimeError}


def broadcast_json(comm, payload, root: int = 0, sized: bool = False) -> dict:
    """The root's JSON-able *payload*, on every rank, down a binomial tree
    on its own tag: one message of HEADER_BYTES (the header of broadcast
    and scatter), or, when *sized*, its length and then the bytes (the
    agreed settings, which carry a calibration of any size)."""
    raw = json.dumps(payload).encode() if comm.rank == root else b""
    nbytes = HEADER_BYTES
    if sized:
        length = np.array([len(raw)], np.int64)
        binomial_broadcast(Channel(comm, comm.next_tag()), length.view(np.uint8), root,
                           comm.rank, comm.size)
        nbytes = int(length[0])
    elif len(raw) > HEADER_BYTES:
        raw = json.dumps({"error": payload.get("error", "ValueError"),
                          "message": str(payload.get("message", ""))[:HEADER_BYTES // 2]
                          or "header too large: more than 64 dimensions?"}).encode()
    buf = np.zeros(nbytes, np.uint8)
    if comm.rank == root:
        buf[:len(raw)] = np.frombuffer(raw, np.uint8)
    binomial_broadcast(Channel(comm, comm.next_tag()), buf, root, comm.rank, comm.size)
    return json.loads(bytes(buf).rstrip(b"\0").decode())


def exchange(c, root: int, header, deadline, collective: str, payload=None,
             sizes=None) -> tuple:
    """The root's (DType, shape, inline data or None), on every rank.

    One message down a binomial tree: 8 int64 (status, dtype code, ndim and
    up to SHORT_DIMS dimensions), then, when the root passes a *payload*
    (uint8, at most INLINE_BYTES), the data itself: a broadcast's whole
    (inline_broadcast), or a scatter's blocks in the order of ranks
    relative to the root, each child getting its subtree's (Note [Inline
    scatter]; the inline data returned is then this rank's block). An error
    on the root, or more dimensions, take a second, JSON message; every
    rank raises the root's error. *header* is the root's dict from
    root_header, None elsewhere; *sizes* is scatter's (None or a tuple of
    ints). Receivers leave room for an inline payload.
    """
    message = np.zeros(WORD_BYTES + INLINE_BYTES, np.uint8)
    word = message[:WORD_BYTES].view(np.int64)
    length = WORD_BYTES
    if c.rank == root:
        shape = header.get("shape", ())
        if "error" in header or len(shape) > SHORT_DIMS:
            word[0] = HEADER_LONG
        else:
            word[:] = make_word(BY_NAME[header["dtype"]], shape)
            if payload is not None:
                word[0] = HEADER_INLINE
                if collective == "broadcast":
                    length += len(payload)
                    message[WORD_BYTES:length] = payload
    channel = Channel(c, c.next_tag())
    parent, children = binomial_edges(root, c.rank, c.size)
    channel.begin(deadline, collective, "header", (parent is not None) + len(children))
    if parent is not None:
        channel.recv(message, parent)
    if collective == "scatter" and word[0] == HEADER_INLINE:
        dtype, shape = read(c, root, header, word)
        blocks = payload if parent is None else message[WORD_BYTES:]
        return dtype, shape, scatter_forward(c, root, dtype, shape, word, blocks, channel, sizes)
    sent = message[:message_length(word)]
    channel.wait([r for child in children for r in channel.isend(sent, child)])
    dtype, shape = read(c, root, header, word)
    return dtype, shape, inline_data(message, word)


def message_length(word) -> int:
    """The bytes of the header message that carried *word*."""
    if word[0] != HEADER_INLINE:
        return WORD_BYTES
    return WORD_BYTES + math.prod(int(d) for d in word[3:3 + int(word[2])]) \
        * BY_CODE[int(word[1])].itemsize


def inline_data(message, word):
    """The broadcast's data in a received header message, or None."""
    return message[WORD_BYTES:message_length(word)] if word[0] == HEADER_INLINE else None


def inline_broadcast(c, plan, nbytes: int) -> bool:
    """Whether the root sends a broadcast's data inside its header: small,
    and on the header's own tree (the binomial tree, or the pipeline at
    p = 2: one link either way); no data at all goes the same way, the
    header its only message."""
    return nbytes <= INLINE_BYTES and on_tree(c, plan)


def on_tree(c, plan) -> bool:
    return plan.algorithm == "binomial" or (c.size == 2 and plan.algorithm == "pipeline")


def make_word(dtype: DType, shape) -> np.ndarray:
    """The short header of an array of *dtype* and *shape* (at most SHORT_DIMS dimensions)."""
    word = np.zeros(8, np.int64)
    word[:3 + len(shape)] = [HEADER_OK, dtype.code, len(shape), *shape]
    return word


def read(c, root: int, header, word) -> tuple:
    """(DType, shape) of a header word every rank has received; a long
    header's JSON follows (the root's error, raised on every rank)."""
    if word[0] == HEADER_LONG:
        header = broadcast_json(c, header, root, sized=True)
        raise_carried(header)
        return BY_NAME[header["dtype"]], tuple(header["shape"])
    ndim = int(word[2])
    return BY_CODE[int(word[1])], tuple(int(d) for d in word[3:3 + ndim])


def raise_carried(header: dict) -> None:
    if "error" in header:
        raise CARRIED_ERRORS.get(header["error"], ValueError)(header["message"])


def root_header(x, check=None) -> tuple:
    """(header, message or None) for the root's input; a bad input becomes
    an error header that every rank raises."""
    try:
        msg = _message.message(x)
        if check is not None:
            check(msg)
    except (TypeError, ValueError) as exc:
        return {"error": type(exc).__name__, "message": f"root: {exc}"}, None
    return {"dtype": msg.dtype.name, "shape": list(msg.shape)}, msg


# Note [Inline scatter]
# ~~~~~~~~~~~~~~~~~~~~~
# A scatter of at most INLINE_BYTES in all, on the header's own tree (the
# binomial tree, or either algorithm at p = 2: one link), sends each child
# the header word and its subtree's blocks in one message, as a broadcast
# of that size carries its data in the header (INLINE_BYTES). The word says
# so (HEADER_INLINE), so every rank knows, whichever path it takes, that no
# data phase follows and no second tag is taken. A rank's message holds
# its subtree's blocks in the order of ranks relative to the root: its own
# block first, then each child's subtree; it passes each child the word
# and that child's part, largest subtree first, and keeps its own block.
# Every edge of the tree is then one message, as in native MPI, where a
# small scatter was two (the word, then the data).


def inline_scatter(c, plan) -> bool:
    """Whether a scatter's root sends the data inside the header
    (Note [Inline scatter])."""
    return c.size >= 2 and sum(plan.args.counts) <= INLINE_BYTES and (
        plan.algorithm == "binomial" or c.size == 2)


def inline_scatter_spans(p: int, r: int, root: int, counts) -> tuple:
    """(own block bytes, [(child rank, lo, hi)] largest subtree first, the
    subtree's bytes) of rank r's part of an inline scatter's blocks, in
    bytes from the start of its own block."""
    rel = (r - root) % p
    ends = np.cumsum([0] + [counts[(i + root) % p] for i in range(p)]).tolist()
    _, end, children = binomial_subtree(rel, p)
    base = ends[rel]
    kids = [((first + root) % p, ends[first] - base, ends[last] - base)
            for first, last in reversed(children)]
    return ends[rel + 1] - base, kids, ends[end] - base


def inline_scatter_payload(c, r: int, alg: str, msg, sizes=None):
    """The root's blocks in relative order (uint8) when its scatter goes
    inline, else None (*sizes*: scatter's, None or a tuple of ints)."""
    if len(msg.shape) > SHORT_DIMS or not msg.shape:
        return None                         # a long header, or the root's error
    plan = _scatter_plan(c, msg.dtype, msg.shape, r, alg, sizes)
    if not inline_scatter(c, plan):
        return None
    split = sum(plan.args.counts[:r])
    return np.concatenate((msg.data[split:], msg.data[:split]))


def scatter_forward(c, root: int, dtype, shape, word, blocks, channel, sizes=None):
    """Pass each child the word and its subtree's part of *blocks* (this
    rank's part of an inline scatter, Note [Inline scatter]); this rank's
    own block."""
    counts = _split_counts(shape, dtype.itemsize, c.size, sizes)
    own, kids, _ = inline_scatter_spans(c.size, c.rank, root, counts)
    head = word.view(np.uint8)
    messages = [np.concatenate((head, blocks[lo:hi])) for _, lo, hi in kids]
    channel.wait([q for (child, _, _), m in zip(kids, messages) for q in channel.isend(m, child)])
    return blocks[:own]
