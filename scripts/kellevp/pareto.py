"""Pareto fronts and hypervolume, every objective minimised (the design-space search's fronts,
docs/explore.md). Exact and small: the fronts a search keeps are tens of designs.

  dominates(a, b, scale)   a's objectives, scaled up by `scale`, are no worse than b's and one better
  front(items, key, scale) the items no other item dominates (scale > 1: within scale - 1 of the front)
  hypervolume(points, ref) the volume the points dominate up to the reference point
"""


def dominates(a, b, scale=1.0):
    """a dominates b (sequences of objectives), with a's objectives scaled up by `scale`."""
    return all(x * scale <= y for x, y in zip(a, b)) and any(x * scale < y for x, y in zip(a, b))


def front(items, key, scale=1.0):
    """The items whose objectives (key(item)) no other item dominates, in their order; with
    scale > 1 the items within (scale - 1) of the front: none dominates them even scaled up."""
    vecs = [list(key(i)) for i in items]
    return [it for j, it in enumerate(items)
            if not any(dominates(vecs[k], vecs[j], scale) for k in range(len(items)) if k != j)]


def hypervolume(points, ref):
    """The volume of the region that the points dominate and that dominates `ref` (every
    objective minimised; points beyond ref in any objective add nothing). Slices along the last
    objective (the HSO algorithm): exact, O(n^(d-1)) for n points in d objectives."""
    pts = [tuple(p) for p in points if all(x < r for x, r in zip(p, ref))]
    if not pts:
        return 0.0
    if len(ref) == 1:
        return float(ref[0] - min(p[0] for p in pts))
    pts.sort(key=lambda p: p[-1])
    volume = 0.0
    for i, p in enumerate(pts):
        upper = pts[i + 1][-1] if i + 1 < len(pts) else ref[-1]
        if upper > p[-1]:
            below = [q[:-1] for q in pts[:i + 1]]  # the points whose slab reaches this slice
            volume += hypervolume(front(below, key=lambda q: q), ref[:-1]) * (upper - p[-1])
    return volume
