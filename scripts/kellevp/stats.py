"""Means the studies report."""
import math


def geomean(values, weights=None):
    """The (weighted) geometric mean; NaN for no values, None when a value is missing or not
    positive (a mean of ratios has no meaning there)."""
    values = list(values)
    if not values:
        return float("nan")
    if any(v is None or v <= 0 for v in values):
        return None
    w = list(weights) if weights is not None else [1.0] * len(values)
    return math.exp(sum(wi * math.log(v) for v, wi in zip(values, w)) / sum(w))
