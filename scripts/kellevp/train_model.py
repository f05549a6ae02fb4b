"""Trains the project's small Llama-style language model on the King James Bible and exports it in
the format functional mode reads (docs/trained-model.md).

  scripts/train-model                              # into results/train-model/
  scripts/train-model --out scenarios/functional/trained   # the committed model, regenerated
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
     attention, gated SiLU FFN, tied classifier) trained with AdamW on random windows of the
     training tokens;
  4. the held-out perplexity (teacher-forced, non-overlapping windows of the full context) beside a
     unigram model's on the same tokens, for the weights as exported and as functional mode
     quantises them (int8 per output channel);
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

# Model and training shapes. `default` is the committed model; `small` a seconds-long run.
# Training runs in phases of (steps, batch, window): short windows first (attention's cost grows
# with the window), then windows of the full context so that RoPE and attention learn every
# position up to it. The learning rate follows one warm-up and cosine over all the steps.
SIZES = {
    "default": dict(vocab=1024, dim=128, layers=4, heads=4, kv_heads=2, ffn=352, seq_len=1024,
                    phases=[(700, 8, 256), (150, 2, 1024)], lr=2e-3, min_lr=2e-4, warmup=50,
                    weight_decay=0.1, check_context=128, check_decode=32),
    "small": dict(vocab=320, dim=32, layers=2, heads=4, kv_heads=2, ffn=64, seq_len=128,
                  phases=[(12, 4, 32), (8, 2, 128)], lr=2e-3, min_lr=2e-4, warmup=5, weight_decay=0.1,
                  check_context=16, check_decode=8),
}
ROPE_THETA = 10000.0
NORM_EPS = 1e-5


# ---- the text ----------------------------------------------------------------------------------

def read_bible():
    """[(book, text)] in canonical order, from Debian's `bible` program."""
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
    return [(b, "\n\n".join("\n".join(v) for v in cs) + "\n") for b, cs in books]


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

        def forward(self, idx):
            T = idx.shape[1]
            x = self.embed(idx)
            for b in self.blocks:
                x = b(x, self.cos[:T], self.sin[:T], self.mask)
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


def nll(torch, model, tokens, T):
    """Summed negative log-likelihood and count of every next token over non-overlapping windows
    of T predictions (the last, shorter window too)."""
    F = torch.nn.functional
    total, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(tokens) - 1, T):
            w = torch.tensor(tokens[i:i + T + 1])[None]
            lg = model(w[:, :-1])
            total += float(F.cross_entropy(lg[0].double(), w[0, 1:], reduction="sum"))
            n += w.shape[1] - 1
    return total, n


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
    ap.add_argument("--name", default="kjv-llama", help="weights file name without .safetensors")
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
    wall0 = time.monotonic()

    books = read_bible()
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
    print(f"{PROG}: tokenizer of {c['vocab']} tokens; {len(train)} training tokens, {len(held)} held out "
          f"({time.monotonic() - wall0:.1f} s)", flush=True)

    model = build_model(torch, c)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], betas=(0.9, 0.95), weight_decay=c["weight_decay"])
    gen = torch.Generator().manual_seed(a.seed)
    data = torch.tensor(train)
    T = c["seq_len"]
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
            starts = torch.randint(0, len(train) - W - 1, (B,), generator=gen).tolist()
            x = torch.stack([data[s:s + W] for s in starts])
            y = torch.stack([data[s + 1:s + W + 1] for s in starts])
            loss = torch.nn.functional.cross_entropy(model(x).view(-1, c["vocab"]), y.view(-1))
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

    f_nll, n = nll(torch, model, held, T)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, a.name + ".safetensors")
    write_safetensors(torch, model, c, path)
    quantise_int8(torch, model)
    q_nll, _ = nll(torch, model, held, T)
    u_nll = unigram_nll(held[1:1 + n])  # the same predicted tokens: every one but the first
    # The functional check's window: the check book's tokens as the platform encodes its text;
    # the prefill predicts token C, each of D decode steps the next one.
    book = dict(books)[CHECK_BOOK]
    ids = tok.encode(book)
    C, D = c["check_context"], c["check_decode"]
    with torch.no_grad():
        lg = model(torch.tensor(ids[:C + D])[None])[0, C - 1:].double()
        w_nll = float(torch.nn.functional.cross_entropy(lg, torch.tensor(ids[C:C + D + 1]), reduction="sum"))
    text_file = CHECK_BOOK.lower().replace(" ", "-") + ".txt"
    with open(os.path.join(a.out, text_file), "w") as f:
        f.write(book)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(hf_config(c), f, indent=2)
        f.write("\n")
    tok.write(os.path.join(a.out, "tokenizer.bin"))

    wall = time.monotonic() - wall0
    record = {
        "command": f"scripts/train-model --size {a.size} --seed {a.seed} --threads {a.threads}",
        "data": {"source": "King James Version (1611), public domain; Debian bible-kjv-text via bible-kjv's "
                           "`bible -l100000 gen1:1-rev22:21`",
                 "text_sha256": hashlib.sha256("".join(t for _, t in books).encode()).hexdigest(),
                 "held_out_books": list(HELD_OUT), "training_tokens": len(train), "held_out_tokens": len(held)},
        "tokenizer": {"kind": "byte-level BPE (llama2.c tokenizer.bin, run.c's encoder)", "vocab": c["vocab"]},
        "model": {"dim": c["dim"], "layers": c["layers"], "heads": c["heads"], "kv_heads": c["kv_heads"],
                  "ffn": c["ffn"], "vocab": c["vocab"], "context": T, "parameters": params,
                  "rope_theta": ROPE_THETA, "rms_norm_eps": NORM_EPS, "tied_classifier": True},
        "training": {k: c[k] for k in ("phases", "lr", "min_lr", "warmup", "weight_decay")}
                    | {"optimizer": "AdamW, betas (0.9, 0.95), gradient norm clipped at 1",
                       "seed": a.seed, "threads": a.threads, "tokens_seen": tokens_seen,
                       "final_loss": round(loss.item(), 6), "torch": torch.__version__},
        "held_out": {"windows_of": T, "predicted_tokens": n,
                     "perplexity": math.exp(f_nll / n), "perplexity_int8": math.exp(q_nll / n),
                     "unigram_perplexity": math.exp(u_nll / n)},
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
    print(f"{PROG}: held-out perplexity {h['perplexity']:.2f} (int8 {h['perplexity_int8']:.2f}), "
          f"unigram {h['unigram_perplexity']:.2f}, over {n} tokens; {wall:.0f} s in all ({train_s:.0f} s training, "
          f"{a.threads} threads); files in {a.out}")

