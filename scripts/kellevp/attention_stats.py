"""What an attention trace (.katt, docs/policies.md "trace") says about the statistics the
synthetic attention source stands in for (docs/attention.md):

- how many heads keep a token: each query head's H2O/AEP score (its softmax probabilities summed
  over the queries so far) keeps its top N' tokens at the last query; for every pair of heads of
  a layer, the overlap of their kept sets (Jaccard) against what independent heads would give
  (N' / T kept at random), and per KV head group, the share of tokens kept by one head that every
  head of the layer keeps (what AERP calls popular when all heads must agree);
- the score distribution: attention on the first positions (sinks), on the recent tokens, and how
  concentrated each row is (the share of its mass on its top 10 % keys).

  scripts/attention-stats TRACE.katt [--budget N] [--sinks 4] [--recent 32] [--json]
Prints a table (or one JSON object); exits 2 with a one-line error on a bad file.
"""
import json
import os

import numpy as np
from .cli import Parser, entry, fail


def read(path):
    if os.path.isdir(path):
        fail(f"{path}: is a folder; expected a .katt file")
    try:
        with open(path, "rb") as f:
            head = f.read(28)
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if len(head) < 28 or head[:8] != b"KELLEATT":
        fail(f"{path}: not an attention trace (expected the magic KELLEATT and a 28-byte header)")
    version, S, L, H, T = np.frombuffer(head[8:], dtype="<u4")
    if version != 1:
        fail(f"{path}: version {version}; expected 1")
    tri = T * (T + 1) // 2
    need = 28 + 4 * int(S) * int(L) * int(H) * int(tri)
    if os.path.getsize(path) != need:
        fail(f"{path}: {os.path.getsize(path)} bytes; the header's {S} x {L} x {H} x {T} needs {need}")
    data = np.memmap(path, dtype="<f4", mode="r", offset=28, shape=(int(S), int(L), int(H), int(tri)))
    return int(S), int(L), int(H), int(T), data


def rows(tri_row, T):
    """The causal logits of one head as a T x T matrix (-inf above the diagonal)."""
    m = np.full((T, T), -np.inf, dtype=np.float64)
    idx = np.tril_indices(T)
    m[idx] = tri_row  # row-major lower triangle: query t, keys 0..t
    return m


@entry("attention-stats")
def main(argv):
    ap = Parser(prog="attention-stats", description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--budget", type=int, default=128, help="N': tokens a head keeps (default 128)")
    ap.add_argument("--sinks", type=int, default=4, help="first positions counted as sinks (default 4)")
    ap.add_argument("--recent", type=int, default=32, help="newest tokens counted as recent (default 32)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    S, L, H, T, data = read(a.trace)
    if not 0 < a.budget < T:
        fail(f"--budget {a.budget}: expected 1 .. {T - 1} (the trace has {T} tokens)")
    q0 = min(T - 1, max(a.sinks + a.recent, T // 8))  # queries far enough in to have a past
    overlap, chance, all_keep, sink_mass, recent_mass, top10 = [], [], [], [], [], []
    for s in range(S):
        for l in range(L):
            kept = []
            for h in range(H):
                z = rows(np.asarray(data[s, l, h]), T)
                z -= z.max(axis=1, keepdims=True)
                p = np.exp(z)
                p /= p.sum(axis=1, keepdims=True)
                score = p.sum(axis=0)  # H2O / AEP: the probability each key received, summed
                kept.append(set(np.argsort(-score, kind="stable")[: a.budget].tolist()))
                late = p[q0:]
                sink_mass.append(late[:, : a.sinks].sum(axis=1).mean())
                r = np.zeros_like(late[:, 0])
                for i, t in enumerate(range(q0, T)):
                    r[i] = late[i, max(0, t - a.recent + 1): t + 1].sum()
                recent_mass.append(r.mean())
                srt = np.cumsum(-np.sort(-late, axis=1), axis=1)
                k10 = np.maximum(1, (np.arange(q0, T) + 1) // 10)  # 10 % of each row's keys
                top10.append(srt[np.arange(len(k10)), k10 - 1].mean())
            for i in range(H):
                for j in range(i + 1, H):
                    inter = len(kept[i] & kept[j])
                    overlap.append(inter / len(kept[i] | kept[j]))
            b = a.budget / T
            chance.append(b * b / (2 * b - b * b))  # Jaccard of two independent random N'-subsets
            union = set().union(*kept)
            all_keep.append(len(set.intersection(*kept)) / len(union))
    out = {
        "trace": a.trace, "sequences": S, "layers": L, "heads": H, "tokens": T, "budget": a.budget,
        "head_overlap_jaccard": float(np.mean(overlap)) if overlap else None,
        "head_overlap_if_independent": float(np.mean(chance)),
        "kept_by_every_head": float(np.mean(all_keep)),
        "sink_mass": float(np.mean(sink_mass)), "recent_mass": float(np.mean(recent_mass)),
        "top10pct_mass": float(np.mean(top10)), "from_query": q0,
    }
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{a.trace}: {S} sequence(s), {L} layers, {H} heads, {T} tokens; N' = {a.budget}")
    print(f"  heads' kept sets overlap (Jaccard, mean over pairs): {out['head_overlap_jaccard']:.3f} "
          f"(independent heads: {out['head_overlap_if_independent']:.3f})")
    print(f"  tokens kept by every head of a layer, of those any head keeps: {out['kept_by_every_head']:.3f}")
    print(f"  attention mass, queries {q0}..{T - 1}: first {a.sinks} positions {out['sink_mass']:.3f}, "
          f"newest {a.recent} tokens {out['recent_mass']:.3f}, top 10 % of keys {out['top10pct_mass']:.3f}")

