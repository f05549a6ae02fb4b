#!/usr/bin/env python3
"""The bad-input corpus: every case in cases.txt must give one line of error with its exit status.

  run_bad.py KELLE_VP SOURCE_DIR WORK_DIR [NAME_REGEX]

A case is one line of cases.txt, fields separated by ' | ':
  name | exit status | regex | arguments | file content (optional)
The output (stdout and stderr together) must be exactly one line (status 'N*': its last line), starting with 'kelle-vp: error: '
(or 'sweep: error: ' when the arguments start with SWEEP) and matching the regex (extended, Python
syntax). In the arguments and the content: {SC} the built-in scenarios, {TMP} the case's own work
folder, {FILE} the case's file (the content, written to {TMP}/<name>.yaml), {BIN} the generated
binary inputs (model files, attention traces: see binaries()), {SWEEP} scripts/sweep, {VP} kelle-vp.
Content: '\\n' is a new line, '\\t' a tab; '@name' instead of a content names a generator (generated()).
Arguments starting with 'FSIZE=N' run the command with files limited to N bytes (RLIMIT_FSIZE, SIGXFSZ
ignored: a write beyond it fails with EFBIG, as on a full disk).
A case leaves no file in its folder but its own ({name}.yaml): an output that was refused or failed
leaves nothing behind (no temporary file, no partial set of results; empty folders are allowed).
The cases run two at a time; a failure prints the case and its output, and every failure is listed.
Files are UTF-8 (a case may hold a look-alike Unicode letter).
"""
import concurrent.futures as cf
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys


def katt(S, L, H, T, vals=None, version=1, extra=b""):
    n = S * L * H * T * (T + 1) // 2
    vals = vals if vals is not None else [0.01 * (i % 50) for i in range(n)]
    return b"KELLEATT" + struct.pack("<5I", version, S, L, H, T) + struct.pack(f"<{len(vals)}f", *vals) + extra


def llama2c(dim=8, ffn=16, L=1, H=2, KV=2, V=16, seq=32, tied=True, poison=None):
    hd = dim // H
    kv = KV * hd
    n = V * dim + L * dim + L * dim * dim + 2 * L * dim * kv + L * dim * dim + L * dim + 3 * L * dim * ffn + dim + seq * hd
    if not tied:
        n += V * dim
    w = [((i * 7) % 13 - 6) / 10 for i in range(n)]
    if poison is not None:
        w[V * dim + 3] = poison
    return struct.pack("<7i", dim, ffn, L, H, KV, V if tied else -V, seq) + struct.pack(f"<{n}f", *w)


def safetensors(dim=8, ffn=16, L=1, H=2, KV=2, V=16, meta=True, poison=None, tweak=None):
    hd = dim // H
    kv = KV * hd
    t = [("model.embed_tokens.weight", [V, dim])]
    for i in range(L):
        p = f"model.layers.{i}."
        t += [(p + "self_attn.q_proj.weight", [H * hd, dim]), (p + "self_attn.k_proj.weight", [kv, dim]),
              (p + "input_layernorm.weight", [dim]), (p + "self_attn.v_proj.weight", [kv, dim]),
              (p + "self_attn.o_proj.weight", [dim, H * hd]), (p + "post_attention_layernorm.weight", [dim]),
              (p + "mlp.gate_proj.weight", [ffn, dim]), (p + "mlp.up_proj.weight", [ffn, dim]),
              (p + "mlp.down_proj.weight", [dim, ffn])]
    t += [("model.norm.weight", [dim])]
    h = {}
    if meta:
        h["__metadata__"] = {"num_attention_heads": str(H), "num_key_value_heads": str(KV),
                             "max_position_embeddings": "64"}
    data = b""
    for name, shape in t:
        n = 1
        for d in shape:
            n *= d
        vals = [0.01 * (i % 17) for i in range(n)]
        if poison is not None and name == "model.norm.weight":
            vals[0] = poison
        b = len(data)
        data += struct.pack(f"<{n}f", *vals)
        h[name] = {"dtype": "F32", "shape": shape, "data_offsets": [b, len(data)]}
    if tweak:
        tweak(h)
    hs = json.dumps(h).encode()
    return struct.pack("<Q", len(hs)) + hs + data


def binaries():
    """Named binary inputs: attention traces (.katt) and model files."""
    big = 0xFFFFFFFF
    out = {
        "trace_magic.katt": b"NOTATRACE" + bytes(40),
        "trace_short.katt": b"KELLEATT\x01\x00",
        "trace_version.katt": katt(1, 1, 32, 2, version=2),
        "trace_zero.katt": katt(0, 1, 32, 2),
        "trace_truncated.katt": katt(1, 1, 32, 4)[:-8],
        "trace_trailing.katt": katt(1, 1, 32, 4, extra=b"\0\0\0\0"),
        "trace_nan.katt": katt(1, 1, 32, 80, vals=[0.0] * 5 + [float("nan")] + [0.0] * (32 * 80 * 81 // 2 - 6)),
        "trace_inf.katt": katt(1, 1, 32, 80, vals=[0.0] * 9 + [float("inf")] + [0.0] * (32 * 80 * 81 // 2 - 10)),
        "trace_heads.katt": katt(1, 1, 4, 80),
        "trace_short_run.katt": katt(1, 1, 32, 8),
        "trace_overflow.katt": b"KELLEATT" + struct.pack("<5I", 1, big, big, big, big),
        "model_wrap.bin": struct.pack("<7i", 1 << 30, 1 << 30, 1 << 30, 2, 2, 1 << 30, 1 << 30) + bytes(8),
        "model_short.bin": b"\x08\x00\x00\x00\x10\x00",
        "model_negative.bin": struct.pack("<7i", 8, -16, 1, 2, 2, 16, 32) + bytes(64),
        "model_heads.bin": struct.pack("<7i", 10, 16, 1, 4, 4, 16, 32) + bytes(64),
        "model_size.bin": llama2c()[:-4],
        "model_nan.bin": llama2c(poison=float("nan")),
        "model_inf.bin": llama2c(poison=float("-inf")),
        "model_ok.bin": llama2c(),
        "st_length.safetensors": struct.pack("<Q", 1 << 40) + b"{}",
        "st_json.safetensors": struct.pack("<Q", 5) + b"{nope",
        "st_array.safetensors": struct.pack("<Q", 2) + b"[]",
        "st_noheads.safetensors": safetensors(meta=False),
        "st_nan.safetensors": safetensors(poison=float("nan")),
    }

    def shape(h):
        h["model.norm.weight"]["shape"] = [9]

    def dtype(h):
        h["model.norm.weight"]["dtype"] = "I64"

    def offsets(h):
        h["model.norm.weight"]["data_offsets"] = [0, 4]

    def negshape(h):
        h["model.embed_tokens.weight"]["shape"] = [-16, 8]

    def heads_neg(h):
        h["__metadata__"]["num_attention_heads"] = "-2"

    out["st_shape.safetensors"] = safetensors(tweak=shape)
    out["st_dtype.safetensors"] = safetensors(tweak=dtype)
    out["st_offsets.safetensors"] = safetensors(tweak=offsets)
    out["st_negshape.safetensors"] = safetensors(tweak=negshape)
    out["st_heads_neg.safetensors"] = safetensors(tweak=heads_neg)
    return out


def generated(name):
    """Contents too large to write in a line."""
    if name == "alias_bomb":
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for i in range(1, 9):
            lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
        return "system: kelle_edram\nunused:\n" + "\n".join("  " + l for l in lines) + "\n"
    if name == "big_list":
        return "system: kelle_edram\nunused: [" + ",".join(["1"] * 300000) + "]\n"
    if name == "empty":
        return ""
    if name == "huge_file":
        return "# " + "x" * (5 << 20) + "\n"
    if name == "deep_flow":  # deeper than yaml-cpp's own guard (its "bad file")
        return "system: kelle_edram\nunused: " + "[" * 3000 + "]" * 3000 + "\n"
    raise SystemExit(f"run_bad.py: no generator '{name}'")


def parse_cases(path):
    cases = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split(" | ")
            if len(parts) < 4:
                raise SystemExit(f"{path}:{n}: expected name | status | regex | arguments [| content]")
            name, rc, regex, args = (p.strip() for p in parts[:4])
            content = " | ".join(parts[4:]) if len(parts) > 4 else None
            cases.append((name, rc, regex, args, content, n))
    return cases


def main():
    vp, src, work = sys.argv[1:4]
    only = re.compile(sys.argv[4]) if len(sys.argv) > 4 else None
    cases = parse_cases(os.path.join(src, "tests", "bad", "cases.txt"))
    names = [c[0] for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"run_bad.py: duplicate case names: {', '.join(sorted(dup))}")
    shutil.rmtree(work, ignore_errors=True)
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    for n, data in binaries().items():
        with open(os.path.join(bindir, n), "wb") as f:
            f.write(data)
    env = dict(os.environ, KELLE_VP_SCENARIOS=os.path.join(src, "scenarios"))

    def run(case):
        name, rc, regex, args, content, line = case
        tmp = os.path.join(work, name)
        os.makedirs(tmp)
        file = os.path.join(tmp, name + ".yaml")
        subst = {"{SC}": os.path.join(src, "scenarios"), "{TMP}": tmp, "{FILE}": file, "{BIN}": bindir,
                 "{SWEEP}": os.path.join(src, "scripts", "sweep"), "{VP}": vp}

        def fill(s):
            for k, v in subst.items():
                s = s.replace(k, v)
            return s

        if content is not None:
            text = generated(content[1:]) if content.startswith("@") else fill(content.replace("\\n", "\n").replace("\\t", "\t"))
            with open(file, "w", encoding="utf-8") as f:
                f.write(text)
        argv = [fill(a) for a in shlex.split(args)]
        limit = []
        if argv and argv[0].startswith("FSIZE="):  # files limited to N bytes: a write beyond fails
            n = int(argv.pop(0)[6:])
            limit = [sys.executable, "-c",
                     "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
                     f"resource.setrlimit(resource.RLIMIT_FSIZE, ({n}, {n})); os.execv(sys.argv[1], sys.argv[1:])"]
        sweep = argv and argv[0] == "SWEEP"
        cmd = limit + ([sys.executable, subst["{SWEEP}"]] + argv[1:] if sweep else [vp] + argv)
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               cwd=tmp, timeout=120, encoding="utf-8", errors="replace")
            out, got = r.stdout, r.returncode
        except subprocess.TimeoutExpired:
            out, got = "(no answer within 120 s)", "timeout"
        left = sorted(os.path.relpath(os.path.join(d, f), tmp) for d, _, fs in os.walk(tmp) for f in fs
                      if os.path.join(d, f) != file)
        if left:  # a refused or failed output leaves nothing
            out += f"\n(left behind in {tmp}: {', '.join(left)})"
        lines = [l for l in out.splitlines() if l.strip()]
        prefix = "sweep: error: " if sweep else "kelle-vp: error: "
        many = rc.endswith("*")  # status N*: any lines before the last (a listing, then the errors)
        want = int(rc.rstrip("*"))
        last = lines[-1] if lines and (many or len(lines) == 1) else None
        ok = got == want and last is not None and last.startswith(prefix) and re.search(regex, last) and not left
        return case, ok, got, out

    t = [c for c in cases if not only or only.search(c[0])]
    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, t))
    bad = [r for r in results if not r[1]]
    for (name, rc, regex, args, content, line), _, got, out in bad:
        print(f"FAIL {name} (cases.txt:{line}): expected status {rc} and one line /{regex}/, got status {got}:")
        print("  " + "\n  ".join(out.rstrip().splitlines()[-6:] or ["(no output)"]))
    print(f"{len(results) - len(bad)} of {len(results)} bad inputs give their error")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
