"""The small MLP the numpy examples train: data, parameters, loss and gradients.

A two-layer perceptron (tanh hidden layer, softmax output, cross-entropy)
on a seeded synthetic dataset, in float64. ``loss_and_grads`` returns the
*sum* of the per-sample losses over the samples it is given, divided by
``total`` (the global batch size), and its gradient: summing those over
any split of the batch gives the full batch's mean loss and gradient.
"""
import numpy as np

SAMPLES, FEATURES, HIDDEN, CLASSES = 240, 20, 32, 3


def dataset(seed: int = 0):
    """(x, labels): the same on every rank."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((SAMPLES, FEATURES))
    w = rng.standard_normal((FEATURES, CLASSES))
    labels = np.argmax(x @ w + 0.5 * rng.standard_normal((SAMPLES, CLASSES)), axis=1)
    return x, labels


def init_params(seed: int = 1) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((FEATURES, HIDDEN)) / np.sqrt(FEATURES), np.zeros(HIDDEN),
            rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN), np.zeros(CLASSES)]


def softmax_loss(logits, labels, total: int):
    """(sum of the samples' cross-entropy losses / total, its gradient with
    respect to *logits*, which it overwrites)."""
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    n = len(logits)
    loss = -np.log(p[np.arange(n), labels]).sum() / total
    p[np.arange(n), labels] -= 1.0
    p /= total
    return loss, p


def loss_and_grads(params, x, labels, total: int):
    """(sum of the samples' losses / total, its gradient per parameter)."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    loss, d_logits = softmax_loss(h @ w2 + b2, labels, total)
    d_h = (d_logits @ w2.T) * (1.0 - h * h)
    return loss, [x.T @ d_h, d_h.sum(axis=0), h.T @ d_logits, d_logits.sum(axis=0)]


def reference(steps: int, update) -> list:
    """Per-step losses of single-process full-batch training with *update*
    (``update(params, grads, state)``, in place)."""
    x, labels = dataset()
    params, state, losses = init_params(), {}, []
    for _ in range(steps):
        loss, grads = loss_and_grads(params, x, labels, len(x))
        losses.append(loss)
        update(params, grads, state)
    return losses


def report(comm, losses, expected, what: str) -> int:
    """Rank 0 compares the per-step losses with the single-process run;
    every rank returns the same exit status."""
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, expected))
    ok = worst <= 1e-9
    if comm.rank == 0:
        print(f"{what} on {comm.size} ranks: {len(losses)} steps, loss {losses[0]:.6f} -> "
              f"{losses[-1]:.6f}; largest relative difference from single-process "
              f"full-batch training {worst:.2e} ({'OK' if ok else 'FAILED'})", flush=True)
    return 0 if ok else 1
