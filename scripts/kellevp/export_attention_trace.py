"""Export a .katt attention trace (pre-softmax logits) for the `trace` attention source.

Format (docs/policies.md, firmware/workload/attention/trace_source.h), little-endian:
  "KELLEATT", u32 version=1, u32 sequences, u32 layers, u32 heads, u32 tokens,
  then f32 logits for s, l, h, query t, key k <= t (T (T + 1) / 2 values per (s, l, h)).

From a PyTorch model (needs torch and transformers; never run by the platform's tests):

  python3 scripts/export_attention_trace.py --model meta-llama/Llama-2-7b-hf \\
      --text-file prompt.txt --tokens 256 -o scenarios/traces/llama2.katt

Forward hooks on every decoder layer's self-attention module capture the attention
probabilities P (eager attention with output_attentions=True); the trace stores log P. log P
differs from q.k / sqrt(D_h) by a per-row constant (the row's log-sum-exp), which neither the
softmax over a kept subset nor the systolic evictor's row-max quantisation can see, so the
replay is exact for the policies. One forward pass over `tokens` positions gives every query's
row (the decode steps of a real generation see the same causal rows).

Without torch, --demo writes a small trace from a toy random attention (pure Python): that is
how scenarios/traces/example.katt was made (--demo --seed 7 --layers 2 --heads 4 --tokens 64).
"""
import math
import random
import struct
from .cli import entry, fail, parser


def write_trace(path, rows, sequences, layers, heads, tokens):
    """rows(s, l, h, t) -> list of t + 1 floats (logits of query t against keys 0..t)."""
    with open(path, "wb") as f:
        f.write(b"KELLEATT")
        f.write(struct.pack("<5I", 1, sequences, layers, heads, tokens))
        for s in range(sequences):
            for l in range(layers):
                for h in range(heads):
                    for t in range(tokens):
                        r = rows(s, l, h, t)
                        assert len(r) == t + 1
                        f.write(struct.pack("<%df" % (t + 1), *r))


def demo(args):
    """A toy attention: random unit keys and queries per head, a sink direction that every query
    leans towards, a per-token shared importance direction, and a recency term."""
    rng = random.Random(args.seed)
    d = 16

    def vec():
        v = [rng.gauss(0, 1) for _ in range(d)]
        n = math.sqrt(sum(x * x for x in v))
        return [x / n for x in v]

    data = {}
    for s in range(args.sequences):
        for l in range(args.layers):
            shared = [rng.paretovariate(1.2) for _ in range(args.tokens)]
            for h in range(args.heads):
                keys = [vec() for _ in range(args.tokens)]
                own = [rng.paretovariate(1.2) for _ in range(args.tokens)]
                for t in range(args.tokens):
                    q = vec()
                    row = []
                    for k in range(t + 1):
                        x = 2.0 * sum(a * b for a, b in zip(q, keys[k]))
                        x += 4.0 if k < 2 else 0.0                    # sinks
                        x += 2.0 * math.exp(-(t - k) / 8.0)           # recency
                        x += math.log(shared[k] if h % 2 == 0 else own[k])  # heavy hitters
                        row.append(x)
                    data[(s, l, h, t)] = row
    write_trace(args.output, lambda s, l, h, t: data[(s, l, h, t)], args.sequences, args.layers,
                args.heads, args.tokens)


def export_torch(args):
    import torch  # noqa: imported only here
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    text = open(args.text_file).read()
    ids = tok(text, return_tensors="pt").input_ids[:, : args.tokens]
    tokens = ids.shape[1]
    layers = model.config.num_hidden_layers
    heads = model.config.num_attention_heads
    captured = {}

    def hook(layer):
        def fn(module, inputs, output):
            # (attn_output, attn_weights, ...): weights are [batch, heads, T, T] probabilities
            captured[layer] = output[1][0].detach().float().clamp_min(1e-30).log()
        return fn

    handles = [m.self_attn.register_forward_hook(hook(i))
               for i, m in enumerate(model.model.layers)]
    with torch.no_grad():
        model(ids, output_attentions=True)
    for hd in handles:
        hd.remove()
    write_trace(args.output, lambda s, l, h, t: captured[l][h, t, : t + 1].tolist(), 1, layers,
                heads, tokens)


@entry("export_attention_trace.py")
def main(argv):
    p = parser("export_attention_trace.py", __doc__)
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--demo", action="store_true", help="toy attention, no torch needed")
    p.add_argument("--model", help="a Hugging Face causal LM (Llama-style layers)")
    p.add_argument("--text-file")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--sequences", type=int, default=1)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    args = p.parse_args(argv)
    if args.demo:
        demo(args)
    elif args.model and args.text_file:
        export_torch(args)
    else:
        fail("give --demo, or --model and --text-file")

