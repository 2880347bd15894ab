"""Small statistics helpers with no dependencies."""
from __future__ import annotations


def ranks(values: list[float]) -> list[float]:
    """Average ranks (1-based), ties sharing the mean of their positions."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rank correlation (Pearson on average ranks); None when undefined."""
    if len(x) != len(y) or len(x) < 2:
        return None
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return cov / (vx * vy) ** 0.5


def spearman_p_value(x: list[float], y: list[float], permutations: int = 100_000, seed: int = 0) -> float | None:
    """Two-sided p-value of Spearman's rho under the null of no association, by permutation: the share of
    orderings of y whose |rho| reaches the observed one. Every ordering is tried when n <= 8; otherwise
    `permutations` random ones (seeded, so the figure is reproducible), with the observed ordering counted
    once so the p-value is never zero."""
    import itertools
    import random

    observed = spearman(x, y)
    if observed is None:
        return None
    rx, ry = ranks(x), ranks(y)
    n = len(rx)
    mean = (n + 1) / 2
    cx = [a - mean for a in rx]
    norm = (sum(a * a for a in cx) * sum((b - mean) ** 2 for b in ry)) ** 0.5
    target = abs(observed) - 1e-12

    def reaches(order) -> bool:
        return abs(sum(a * (b - mean) for a, b in zip(cx, order))) / norm >= target

    if n <= 8:
        orders = list(itertools.permutations(ry))
        return sum(reaches(o) for o in orders) / len(orders)
    rng = random.Random(seed)
    shuffled, hits = list(ry), 1
    for _ in range(permutations):
        rng.shuffle(shuffled)
        hits += reaches(shuffled)
    return hits / (permutations + 1)


def pairwise_accuracy(estimate: list[float], measured: list[float], tie: float = 0.0) -> tuple[float | None, int]:
    """Share of pairs the estimate orders as the measurement does, and the number of pairs counted.

    Pairs whose measured values differ by less than `tie` (relative to the larger) are left out as
    measurement ties; a pair the estimate ties counts one half."""
    agree, pairs = 0.0, 0
    for i in range(len(measured)):
        for j in range(i + 1, len(measured)):
            m = measured[i] - measured[j]
            if abs(m) <= tie * max(abs(measured[i]), abs(measured[j])) or m == 0:
                continue
            pairs += 1
            e = estimate[i] - estimate[j]
            agree += 0.5 if e == 0 else float((e > 0) == (m > 0))
    return (agree / pairs if pairs else None), pairs
