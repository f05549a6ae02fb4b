"""Trains the project's small Llama-style language model on the King James Bible and exports it in
the format functional mode reads (docs/trained-model.md).

  scripts/train-model                              # into results/train-model/
  scripts/train-model --out scenarios/functional/trained   # the committed model, regenerated
  scripts/train-model --size sinks --out scenarios/functional/trained-sinks   # the sink model (docs/trained-model.md)
  scripts/train-model --size small --out /tmp/m    # a seconds-long run of a tiny model (determinism check)
  scripts/train-model --threads 1                  # the thread count is part of what the result depends on

Steps, all deterministic from --seed (for a given --threads and the same Debian packages):
  1. the text: every verse of the KJV as Debian's `bible` (bible-kjv, bible-kjv-text) prints it; one
     document per book: verses one per line, chapters separated by an empty line; a fixed set of
     books (HELD_OUT) is held out;
  2. a byte-level BPE tokenizer trained on the training books, in llama2.c's tokenizer.bin format;
     the text is encoded exactly as the platform's encoder does (run.c's BPE: BOS, a dummy-prefix
     space, code points with byte fallback, merges of the best-scoring pair);
  3. a Llama-style decoder (RMSNorm, RoPE with interleaved (even, odd) pairs, grouped-query
     attention, gated SiLU FFN, tied classifier) trained with AdamW on windows of the training
     text: for `default` and `small`, windows at random offsets of the training tokens; for
     `sinks` and `small-sinks`, documents: each window begins with BOS at a chapter's start, and
     its text carries refrains (after each verse, with probability `refrain`, an earlier verse of
     the same document again), so that the far context pays (docs/trained-model.md, "The sink
     model");
  4. the held-out perplexity (teacher-forced, non-overlapping windows of the full context, or the
     held-out books' documents) beside a unigram model's on the same tokens, for the weights as
     exported and as functional mode quantises them (int8 per output channel); for a documents
     recipe also with a recent window of 64 keys, with and without 4 sink tokens;
  5. the files: <name>.safetensors (F16, Hugging Face Llama names, q/k rows in Hugging Face's
     half-split RoPE order), config.json, tokenizer.bin, training.json (the record: data, shapes,
     the figures; only its wall-time fields change from run to run) and the held-out text that
     scenarios/functional/trained.yaml teacher-forces.

Debian's python3-torch (hence /usr/bin/python3); the text from bible-kjv and bible-kjv-text.
"""

import collections
import hashlib
import json
import math
import os
import re
import shutil
import struct
import subprocess
import time

from . import ROOT
from .cli import entry, fail, parser
PROG = "train-model"

# Held out from training, fixed: narrative, wisdom, poetry, prophecy, two letters (about 2 % of
# the words). The Gospels are all trained on: they share whole passages with one another.
HELD_OUT = ("Ruth", "Ecclesiastes", "Lamentations", "Jonah", "Galatians", "1 John")
# The held-out book functional mode teacher-forces (scenarios/functional/trained.yaml).
CHECK_BOOK = "Ruth"
SPECIALS = (b"<unk>", b"<s>", b"</s>")  # llama2.c's ids 0, 1, 2; bytes are ids 3 .. 258
BOS = 1

# Model and training shapes. `default` is the committed model (kjv-llama), `sinks` the committed
# sink model (kjv-sinks); `small` and `small-sinks` seconds-long runs of each recipe.
# Training runs in phases of (steps, batch, window): short windows first (attention's cost grows
# with the window), then windows of the full context so that RoPE and attention learn every
# position up to it. The learning rate follows one warm-up and cosine over all the steps.
# `documents`: windows are documents beginning with BOS at a chapter's start (else random offsets
# of the token stream); `refrain`: the probability that an earlier verse of the document follows
# a verse again (0: the text as it is).
_DEFAULT = dict(vocab=1024, dim=128, layers=4, heads=4, kv_heads=2, ffn=352, seq_len=1024,
                phases=[(700, 8, 256), (150, 2, 1024)], lr=2e-3, min_lr=2e-4, warmup=50,
                weight_decay=0.1, check_context=128, check_decode=32, documents=False, refrain=0.0,
                name="kjv-llama")
_SMALL = dict(vocab=320, dim=32, layers=2, heads=4, kv_heads=2, ffn=64, seq_len=128,
              phases=[(12, 4, 32), (8, 2, 128)], lr=2e-3, min_lr=2e-4, warmup=5, weight_decay=0.1,
              check_context=16, check_decode=8, documents=False, refrain=0.0, name="kjv-llama")
SIZES = {
    "default": _DEFAULT,
    "small": _SMALL,
    # The same shape as `default`; 5.3 M tokens, in windows of 512 and 1024 tokens (the far
    # context is what this model is for), a higher peak learning rate (large ones favour attention
    # sinks: Gu et al., "When attention sink emerges in language models", ICLR 2025): 32 min on 2
    # cores shared with a build (docs/trained-model.md, "The sink model").
    "sinks": _DEFAULT | dict(phases=[(1500, 4, 512), (1100, 2, 1024)], lr=3e-3, min_lr=3e-4, warmup=100,
                             documents=True, refrain=0.2, name="kjv-sinks"),
    "small-sinks": _SMALL | dict(documents=True, refrain=0.2, name="kjv-sinks"),
}
# The recent window the sink model's far context is measured against (keys per head: the newest,
# with and without 4 of them spent on the first positions).
WINDOW_KEYS, WINDOW_SINKS = 64, 4
ROPE_THETA = 10000.0
NORM_EPS = 1e-5


# ---- the text ----------------------------------------------------------------------------------

def read_bible():
    """[(book, text)] in canonical order, from Debian's `bible` program."""
    return [(b, book_text(cs)) for b, cs in read_bible_verses()]


def book_text(chapters):
    """A book's text: its verses one a line, chapters separated by an empty line."""
    return "\n\n".join("\n".join(v) for v in chapters) + "\n"


def read_bible_verses():
    """[(book, [[verse, ...] per chapter])] in canonical order, from Debian's `bible` program."""
    exe = shutil.which("bible")
    if not exe:
        fail("no `bible` program: install Debian's bible-kjv and bible-kjv-text (scripts/setup-deps --train)")
    out = subprocess.run([exe, "-l100000", "gen1:1-rev22:21"], check=True, capture_output=True).stdout
    books, verses = [], None
    heading = re.compile(r"^(\S.*) (\d+)$")
    verse = re.compile(r"^\s+(\d+) (.*)$")
    for line in out.decode("ascii").split("\n"):
        if not line.strip():
            continue
        m = heading.match(line)
        if m:
            if not books or books[-1][0] != m.group(1):
                books.append((m.group(1), []))
            verses = []
            books[-1][1].append(verses)
            continue
        m = verse.match(line)
        if not m or verses is None:
            fail(f"bible: unexpected line {line[:60]!r} (expected 'Book N' or '  V text')")
        verses.append(" ".join(m.group(2).split()))  # runs of spaces as one
    n = sum(len(v) for _, cs in books for v in cs)
    if len(books) != 66 or n != 31102:
        fail(f"bible: {len(books)} books and {n} verses (expected the KJV's 66 and 31102)")
    return books


# ---- the tokenizer -----------------------------------------------------------------------------

# The encoder's unit: a newline, or an optional space and a run of other characters, or a lone
# space. BPE merges only inside a chunk, so no token holds a space but at its start nor a newline
# with anything else; then no two neighbouring chunks' pieces join into a token, and run.c's
# merge loop over a whole text equals the same loop chunk by chunk (what `encode` runs).
CHUNK = re.compile(r"\n| ?[^ \n]+| ")


def chunks(text):
    return CHUNK.findall(" " + text) if text else []  # the encoder's dummy-prefix space


def train_bpe(texts, vocab_size):
    """Byte-level BPE over the chunks' counts: the most frequent pair first (ties: the larger pair
    of byte strings). Returns the pieces: the specials, the 256 bytes, the merges in order."""
    counts = collections.Counter(c for t in texts for c in chunks(t))
    words = [[bytes([b]) for b in w.encode()] for w in counts]
    freqs = list(counts.values())
    pairs = collections.Counter()  # pair -> count over the words
    where = collections.defaultdict(set)  # pair -> the words that hold it
    for i, (w, f) in enumerate(zip(words, freqs)):
        for p in zip(w, w[1:]):
            pairs[p] += f
            where[p].add(i)
    pieces = list(SPECIALS) + [bytes([b]) for b in range(256)]
    known = set(pieces)
    while len(pieces) < vocab_size and pairs:
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        ab = a + b
        if ab not in known:  # the same string from another split is the same token
            pieces.append(ab)
            known.add(ab)
        for i in sorted(where.pop((a, b))):
            w, f = words[i], freqs[i]
            for p in zip(w, w[1:]):
                pairs[p] -= f
                if not pairs[p]:
                    del pairs[p]
            j = 0
            while j + 1 < len(w):
                if w[j] == a and w[j + 1] == b:
                    w[j:j + 2] = [ab]
                j += 1
            for p in zip(w, w[1:]):
                pairs[p] += f
                where[p].add(i)
    return pieces


class Tokenizer:
    """llama2.c's tokenizer.bin and run.c's encoder, as firmware/functional/llama_model.cpp has them."""

    def __init__(self, pieces):
        self.pieces = pieces
        self.ids = {}
        for i, p in enumerate(pieces):
            self.ids.setdefault(p, i)
        # Scores: a merge's rank, earlier merges higher; specials and bytes 0 (never a merge's result).
        first = len(SPECIALS) + 256
        self.scores = [0.0] * first + [-float(i - first + 1) for i in range(first, len(pieces))]
        self.cache = {}

    def encode_chunk(self, c):
        t = self.cache.get(c)
        if t is not None:
            return t
        t = []
        for ch in c:  # code points; unknown ones as byte tokens (id = byte + 3)
            b = ch.encode()
            i = self.ids.get(b)
            t.extend([i] if i is not None else [x + 3 for x in b])
        while True:  # merge the best-scoring pair, the leftmost on a tie
            best, at, best_id = -1e10, -1, -1
            for i in range(len(t) - 1):
                j = self.ids.get(self.pieces[t[i]] + self.pieces[t[i + 1]])
                if j is not None and self.scores[j] > best:
                    best, at, best_id = self.scores[j], i, j
            if best_id < 0:
                break
            t[at:at + 2] = [best_id]
        self.cache[c] = t
        return t

    def encode(self, text):
        """BOS, then the text with its dummy-prefix space (the platform's encode(text, true, false))."""
        out = [BOS]
        for c in chunks(text):
            out.extend(self.encode_chunk(c))
        return out

    def write(self, path):
        with open(path, "wb") as f:
            f.write(struct.pack("<i", max(len(p) for p in self.pieces)))
            for p, s in zip(self.pieces, self.scores):
                f.write(struct.pack("<fi", s, len(p)))
                f.write(p)


# ---- documents (the sink model's text) ---------------------------------------------------------

class Documents:
    """Documents of verses: each begins with BOS at a chapter's start and runs on through the
    following chapters (verses one a line, chapters separated by an empty line, as a book's text);
    after each verse but the document's first, with probability `refrain`, one of the document's
    earlier verses (uniformly drawn, never the verse just read) follows again: a refrain, the
    long-range repetition a full cache can use and a recent window cannot. The tokens are the
    platform's encoding of the document's text (BOS, the dummy-prefix space, run.c's BPE), built a
    line at a time: a line's chunks never join a neighbour's (see CHUNK)."""

    def __init__(self, tok, chapters, refrain):
        self.tok, self.chapters, self.refrain = tok, chapters, refrain
        self.lines = {}

    def line(self, text, first):
        key = (text, first)
        t = self.lines.get(key)
        if t is None:
            t = [x for ch in CHUNK.findall((" " if first else "") + text + "\n") for x in self.tok.encode_chunk(ch)]
            self.lines[key] = t
        return t

    def build(self, start, limit, rng, end=None):
        """(text, tokens, next chapter) of the document from chapter `start`, up to `limit` tokens
        (BOS included) or chapter `end`, refrains drawn from `rng` (a random.Random)."""
        end = len(self.chapters) if end is None else end
        lines, toks, seen, c = [], [BOS], [], start
        while c < end and len(toks) < limit:
            if c != start:
                lines.append("")
                toks += self.line("", False)
            for v in self.chapters[c]:
                lines.append(v)
                toks += self.line(v, len(lines) == 1)
                if seen and rng.random() < self.refrain:
                    r = seen[rng.randrange(len(seen))]
                    lines.append(r)
                    toks += self.line(r, False)
                seen.append(v)
                if len(toks) >= limit:
                    break
            c += 1
        return "".join(x + "\n" for x in lines), toks[:limit], c

    def window(self, n, rng):
        """A training window: n tokens of a document from a random chapter's start."""
        while True:
            _, t, _ = self.build(rng.randrange(len(self.chapters)), n, rng)
            if len(t) == n:
                return t

    def cover(self, rng, limit, end):
        """Documents of at most `limit` tokens over chapters 0 .. end - 1, each from a chapter's
        start: the next one starts at the chapter where the previous one was cut (re-reading that
        chapter's start), or after it when the cut chapter was its first (whose tail beyond the
        limit is then not read)."""
        out, c = [], 0
        while c < end:
            _, t, nxt = self.build(c, limit, rng, end)
            out.append(t)
            c = max(c + 1, nxt - 1 if len(t) == limit and nxt - 1 > c else nxt)
        return out


# ---- the model ---------------------------------------------------------------------------------

def build_model(torch, c):
    nn = torch.nn
    F = torch.nn.functional
    hd = c["dim"] // c["heads"]
    group = c["heads"] // c["kv_heads"]

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * self.weight

    def rope(x, cos, sin):  # x: B, T, H, hd; pairs (2i, 2i + 1) as the platform's SFU rotates them
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = c["dim"]
            self.attn_norm = RMSNorm(d)
            self.wq = nn.Linear(d, c["heads"] * hd, bias=False)
            self.wk = nn.Linear(d, c["kv_heads"] * hd, bias=False)
            self.wv = nn.Linear(d, c["kv_heads"] * hd, bias=False)
            self.wo = nn.Linear(c["heads"] * hd, d, bias=False)
            self.ffn_norm = RMSNorm(d)
            self.gate = nn.Linear(d, c["ffn"], bias=False)
            self.up = nn.Linear(d, c["ffn"], bias=False)
            self.down = nn.Linear(c["ffn"], d, bias=False)

        def forward(self, x, cos, sin, mask):
            B, T, _ = x.shape
            h = self.attn_norm(x)
            q = rope(self.wq(h).view(B, T, c["heads"], hd), cos, sin).transpose(1, 2)
            k = rope(self.wk(h).view(B, T, c["kv_heads"], hd), cos, sin).transpose(1, 2)
            v = self.wv(h).view(B, T, c["kv_heads"], hd).transpose(1, 2)
            # Query head j attends with KV head j / group (the platform's grouping).
            k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + mask[:T, :T]
            a = F.softmax(s, -1) @ v
            x = x + self.wo(a.transpose(1, 2).reshape(B, T, -1))
            h = self.ffn_norm(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(c["vocab"], c["dim"])
            self.blocks = nn.ModuleList(Block() for _ in range(c["layers"]))
            self.norm = RMSNorm(c["dim"])
            # RoPE angles in double, as the platform's SFU and reference compute them.
            inv = ROPE_THETA ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
            ang = torch.arange(c["seq_len"], dtype=torch.float64)[:, None] * inv[None, :]
            self.register_buffer("cos", ang.cos().float()[:, None, :], persistent=False)
            self.register_buffer("sin", ang.sin().float()[:, None, :], persistent=False)
            mask = torch.full((c["seq_len"], c["seq_len"]), float("-inf")).triu(1)
            self.register_buffer("mask", mask, persistent=False)
            for name, p in self.named_parameters():
                if p.dim() == 2:  # llama2.c's initialisation: residual outputs scaled down by depth
                    std = 0.02 / math.sqrt(2 * c["layers"]) if name.endswith(("wo.weight", "down.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, idx, mask=None):
            """Logits; `mask` (additive, T x T or larger) replaces the causal mask."""
            T = idx.shape[1]
            x = self.embed(idx)
            for b in self.blocks:
                x = b(x, self.cos[:T], self.sin[:T], self.mask if mask is None else mask)
            return self.norm(x) @ self.embed.weight.t()  # tied classifier

    return Model()


def quantise_int8(torch, model):
    """In place: every matrix as functional mode holds it, int8 symmetric per output channel
    (per token for the embedding): scale = max |w| / 127, q = round-half-even(w / scale)."""
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 2:
                mx = p.abs().amax(1, keepdim=True)
                s = torch.where(mx > 0, mx / 127.0, torch.ones_like(mx))
                p.copy_(torch.clamp(torch.round(p / s), -127, 127) * s)


def nll(torch, model, tokens, T, docs=None, mask=None):
    """Summed negative log-likelihood and count of every next token over non-overlapping windows
    of T predictions (the last, shorter window too), or over each of `docs` (token lists of at
    most T + 1), with the causal mask or `mask`."""
    F = torch.nn.functional
    total, n = 0.0, 0
    wins = docs if docs is not None else [tokens[i:i + T + 1] for i in range(0, len(tokens) - 1, T)]
    with torch.no_grad():
        for d in wins:
            w = torch.tensor(d)[None]
            lg = model(w[:, :-1], mask)
            total += float(F.cross_entropy(lg[0].double(), w[0, 1:], reduction="sum"))
            n += w.shape[1] - 1
    return total, n


def window_mask(torch, T, keys, sinks):
    """The additive mask of a recent window: query t sees the newest keys - sinks positions up to
    itself and the first `sinks` positions (StreamingLLM's cache of `keys` entries)."""
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    ok = (j <= t) & ((j < sinks) | (j > t - (keys - sinks)))
    return torch.zeros(T, T).masked_fill(~ok, float("-inf"))


# ---- the export --------------------------------------------------------------------------------

def hf_rows(torch, w, heads, hd):
    """Interleaved RoPE rows (pair i at 2i, 2i + 1) to Hugging Face's half-split order."""
    w = w.view(heads, hd // 2, 2, -1)
    return w.transpose(1, 2).reshape(heads * hd, -1)


def write_safetensors(torch, model, c, path):
    hd = c["dim"] // c["heads"]
    t = [("model.embed_tokens.weight", model.embed.weight)]
    for i, b in enumerate(model.blocks):
        pre = f"model.layers.{i}."
        t += [(pre + "input_layernorm.weight", b.attn_norm.weight),
              (pre + "self_attn.q_proj.weight", hf_rows(torch, b.wq.weight, c["heads"], hd)),
              (pre + "self_attn.k_proj.weight", hf_rows(torch, b.wk.weight, c["kv_heads"], hd)),
              (pre + "self_attn.v_proj.weight", b.wv.weight),
              (pre + "self_attn.o_proj.weight", b.wo.weight),
              (pre + "post_attention_layernorm.weight", b.ffn_norm.weight),
              (pre + "mlp.gate_proj.weight", b.gate.weight),
              (pre + "mlp.up_proj.weight", b.up.weight),
              (pre + "mlp.down_proj.weight", b.down.weight)]
    t.append(("model.norm.weight", model.norm.weight))
    header = {"__metadata__": {k: str(v).lower() if isinstance(v, bool) else str(v)
                               for k, v in hf_params(c).items()}}
    data = bytearray()
    for name, v in t:
        raw = v.detach().contiguous().to(torch.float16).numpy().astype("<f2").tobytes()
        header[name] = {"dtype": "F16", "shape": list(v.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # the data starts 8-byte aligned (the format's recommendation)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def hf_params(c):
    return {"num_attention_heads": c["heads"], "num_key_value_heads": c["kv_heads"], "rope_theta": ROPE_THETA,
            "rms_norm_eps": NORM_EPS, "tie_word_embeddings": True, "max_position_embeddings": c["seq_len"]}


def hf_config(c):
    return dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=c["dim"],
                intermediate_size=c["ffn"], num_hidden_layers=c["layers"], vocab_size=c["vocab"],
                hidden_act="silu", bos_token_id=BOS, eos_token_id=2, torch_dtype="float16", **hf_params(c))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---- main --------------------------------------------------------------------------------------

@entry("train-model")
def main(argv):
    ap = parser("train-model", __doc__)
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "train-model"),
                    help="output folder (default results/train-model/; --out scenarios/functional/trained "
                         "regenerates the committed model)")
    ap.add_argument("--size", default="default", choices=sorted(SIZES), help="model and training shape")
    ap.add_argument("--seed", type=int, default=31, help="seed of the initialisation and of the windows")
    ap.add_argument("--threads", type=int, default=2, help="PyTorch threads (default 2)")
    ap.add_argument("--name", help="weights file name without .safetensors (default: the size's, kjv-llama or kjv-sinks)")
    a = ap.parse_args(argv)
    if a.threads < 1:
        fail("--threads", f"expected a whole number >= 1, got {a.threads}")
    # Before PyTorch starts its thread pools: waiting threads sleep rather than spin (the machine
    # is shared: spinning threads slow everyone, this run included), OpenBLAS uses the same count.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)
    try:
        import torch
    except ImportError:
        fail("no PyTorch for /usr/bin/python3: install Debian's python3-torch (scripts/setup-deps --train)")
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(a.seed)
    c = dict(SIZES[a.size])
    a.name = a.name or c["name"]
    wall0 = time.monotonic()

    verses = read_bible_verses()
    books = [(b, book_text(cs)) for b, cs in verses]
    names = [b for b, _ in books]
    for b in HELD_OUT:
        if b not in names:
            fail(f"held-out book {b!r} is not among the bible's books")
    train_texts = [t for b, t in books if b not in HELD_OUT]
    held_texts = [t for b, t in books if b in HELD_OUT]
    print(f"{PROG}: {len(train_texts)} training books, {len(held_texts)} held out ({', '.join(HELD_OUT)})", flush=True)

    tok = Tokenizer(train_bpe(train_texts, c["vocab"]))
    if len(tok.pieces) != c["vocab"]:
        fail(f"the BPE ran out of pairs at {len(tok.pieces)} tokens (vocab {c['vocab']})")
    train = [t for text in train_texts for t in tok.encode(text)]
    held = [t for text in held_texts for t in tok.encode(text)]
    T = c["seq_len"]
    docs = held_docs = None
    if c["documents"]:
        import random
        docs = Documents(tok, [ch for b, cs in verses if b not in HELD_OUT for ch in cs], c["refrain"])
        # The held-out books' documents (their own refrains, from a seed of their own), each at most
        # the context plus the token it predicts; every document's text as the platform encodes it.
        hrng = random.Random(a.seed + 2)
        held_docs = [d for b, cs in verses if b in HELD_OUT
                     for d in Documents(tok, cs, c["refrain"]).cover(hrng, T + 1, len(cs))]
        held = [t for d in held_docs for t in d]
    print(f"{PROG}: tokenizer of {c['vocab']} tokens; {len(train)} training tokens, {len(held)} held out "
          f"({time.monotonic() - wall0:.1f} s)", flush=True)

    model = build_model(torch, c)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], betas=(0.9, 0.95), weight_decay=c["weight_decay"])
    gen = torch.Generator().manual_seed(a.seed)
    data = torch.tensor(train)
    if docs is not None:
        import random
        drng = random.Random(a.seed)
    phases = c["phases"]
    steps = sum(p[0] for p in phases)
    tokens_seen = sum(n * b * t for n, b, t in phases)
    print(f"{PROG}: {params / 1e6:.2f} M parameters; {steps} steps, {tokens_seen} tokens "
          f"({', '.join(f'{n} x {b} x {t}' for n, b, t in phases)}), {a.threads} threads", flush=True)
    train0 = time.monotonic()
    model.train()
    step, seen = 0, 0
    for n_steps, B, W in phases:
        for _ in range(n_steps):
            if step < c["warmup"]:
                lr = c["lr"] * (step + 1) / c["warmup"]
            else:  # cosine to min_lr
                f = (step - c["warmup"]) / max(1, steps - c["warmup"])
                lr = c["min_lr"] + 0.5 * (c["lr"] - c["min_lr"]) * (1 + math.cos(math.pi * f))
            for g in opt.param_groups:
                g["lr"] = lr
            if docs is not None:  # documents from a chapter's start, BOS first
                d = torch.tensor([docs.window(W + 1, drng) for _ in range(B)])
                x, y = d[:, :-1], d[:, 1:]
            else:
                starts = torch.randint(0, len(train) - W - 1, (B,), generator=gen).tolist()
                x = torch.stack([data[s:s + W] for s in starts])
                y = torch.stack([data[s + 1:s + W + 1] for s in starts])
            loss = torch.nn.functional.cross_entropy(model(x).view(-1, c["vocab"]), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            seen += B * W
            if step % 50 == 0 or step == steps:
                el = time.monotonic() - train0
                print(f"{PROG}: step {step}/{steps} window {W} loss {loss.item():.3f} lr {lr:.2e} "
                      f"{seen / el:.0f} tokens/s, {el:.0f} s", flush=True)
    train_s = time.monotonic() - train0
    model.eval()
    with torch.no_grad():  # the weights as exported (F16)
        for p in model.parameters():
            p.copy_(p.half().float())

    # Held-out perplexity: the model as exported, then as functional mode quantises it; a unigram
    # model of the training tokens (add-one) on the same predicted tokens.
    counts = collections.Counter(train)
    uni = [math.log((counts[i] + 1) / (len(train) + c["vocab"])) for i in range(c["vocab"])]

    def unigram_nll(tokens):
        return -sum(uni[t] for t in tokens)

    f_nll, n = nll(torch, model, held, T, held_docs)
    windowed = {}
    if docs is not None:  # what the far context is worth: a recent window, without and with sinks
        for sk in (0, WINDOW_SINKS):
            w_nll_, _ = nll(torch, model, held, T, held_docs, window_mask(torch, T, WINDOW_KEYS, sk))
            windowed[f"perplexity_window{WINDOW_KEYS}_sinks{sk}"] = math.exp(w_nll_ / n)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, a.name + ".safetensors")
    write_safetensors(torch, model, c, path)
    quantise_int8(torch, model)
    q_nll, _ = nll(torch, model, held, T, held_docs)
    # The same predicted tokens: every one but each window's (or document's) first.
    u_nll = (unigram_nll(held[1:1 + n]) if held_docs is None
             else sum(unigram_nll(d[1:]) for d in held_docs))
    # The functional check's window: the check book's tokens as the platform encodes its text;
    # the prefill predicts token C, each of D decode steps the next one.
    book = dict(books)[CHECK_BOOK]
    text_file = CHECK_BOOK.lower().replace(" ", "-") + ".txt"
    if docs is not None:  # the check book as one document with its refrains (a seed of its own)
        import random
        cs = dict(verses)[CHECK_BOOK]
        book, bt, _ = Documents(tok, cs, c["refrain"]).build(0, 10 ** 9, random.Random(a.seed + 1))
        if tok.encode(book) != bt:
            fail(f"the {CHECK_BOOK} document's tokens differ from the platform encoder's on its text")
        text_file = CHECK_BOOK.lower().replace(" ", "-") + "-refrains.txt"
    ids = tok.encode(book)
    C, D = c["check_context"], c["check_decode"]
    with torch.no_grad():
        lg = model(torch.tensor(ids[:C + D])[None])[0, C - 1:].double()
        w_nll = float(torch.nn.functional.cross_entropy(lg, torch.tensor(ids[C:C + D + 1]), reduction="sum"))
    with open(os.path.join(a.out, text_file), "w") as f:
        f.write(book)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(hf_config(c), f, indent=2)
        f.write("\n")
    tok.write(os.path.join(a.out, "tokenizer.bin"))

    wall = time.monotonic() - wall0
    record = {
        "command": f"scripts/train-model --size {a.size} --seed {a.seed} --threads {a.threads}"
                   + (f" --name {a.name}" if a.name != c["name"] else ""),
        "data": {"source": "King James Version (1611), public domain; Debian bible-kjv-text via bible-kjv's "
                           "`bible -l100000 gen1:1-rev22:21`",
                 "text_sha256": hashlib.sha256("".join(t for _, t in books).encode()).hexdigest(),
                 "held_out_books": list(HELD_OUT), "training_tokens": len(train), "held_out_tokens": len(held)},
        "tokenizer": {"kind": "byte-level BPE (llama2.c tokenizer.bin, run.c's encoder)", "vocab": c["vocab"]},
        "model": {"dim": c["dim"], "layers": c["layers"], "heads": c["heads"], "kv_heads": c["kv_heads"],
                  "ffn": c["ffn"], "vocab": c["vocab"], "context": T, "parameters": params,
                  "rope_theta": ROPE_THETA, "rms_norm_eps": NORM_EPS, "tied_classifier": True},
        "training": {k: c[k] for k in ("phases", "lr", "min_lr", "warmup", "weight_decay", "documents", "refrain")}
                    | {"optimizer": "AdamW, betas (0.9, 0.95), gradient norm clipped at 1",
                       "seed": a.seed, "threads": a.threads, "tokens_seen": tokens_seen,
                       "final_loss": round(loss.item(), 6), "torch": torch.__version__},
        "held_out": {"windows_of": T, "documents": len(held_docs) if held_docs else None, "predicted_tokens": n,
                     "perplexity": math.exp(f_nll / n), "perplexity_int8": math.exp(q_nll / n),
                     "unigram_perplexity": math.exp(u_nll / n)} | windowed,
        "functional_check": {"text": text_file, "context_len": C, "decode_len": D,
                             "tokens": ids[:C + D + 1], "perplexity_int8": math.exp(w_nll / (D + 1)),
                             "unigram_perplexity": math.exp(unigram_nll(ids[C:C + D + 1]) / (D + 1))},
        "files": {os.path.basename(p): sha256(p) for p in (path, os.path.join(a.out, "tokenizer.bin"))},
        "wall_s": {"training": round(train_s, 1), "total": round(wall, 1)},
    }
    with open(os.path.join(a.out, "training.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    h = record["held_out"]
    for k, v in windowed.items():
        print(f"{PROG}: held-out {k.replace('_', ' ')}: {v:.2f} ({v / h['perplexity'] - 1:+.1%} over the full context)")
    print(f"{PROG}: held-out perplexity {h['perplexity']:.2f} (int8 {h['perplexity_int8']:.2f}), "
          f"unigram {h['unigram_perplexity']:.2f}, over {n} tokens; {wall:.0f} s in all ({train_s:.0f} s training, "
          f"{a.threads} threads); files in {a.out}")

