"""The sink model's documents (scripts/kellevp/train_model.py, docs/trained-model.md "The sink
model"): BOS first, the tokens the platform's encoder gives the document's text, refrains that are
earlier verses of the same document, and held-out documents that cover every chapter. A tokenizer
trained on a few verses; no PyTorch needed."""
import random

from kellevp.train_model import BOS, Documents, Tokenizer, train_bpe

CHAPTERS = [
    ["In the beginning God created the heaven and the earth.",
     "And the earth was without form, and void; and darkness was upon the face of the deep.",
     "And God said, Let there be light: and there was light."],
    ["Thus the heavens and the earth were finished, and all the host of them.",
     "And on the seventh day God ended his work which he had made."],
    ["Now the serpent was more subtil than any beast of the field.",
     "And the woman said unto the serpent, We may eat of the fruit of the trees of the garden."],
]


def tokenizer():
    return Tokenizer(train_bpe(["\n".join(v for c in CHAPTERS for v in c)], 300))


def test_document_tokens_are_the_encoders_and_start_with_bos():
    tok = tokenizer()
    docs = Documents(tok, CHAPTERS, 0.5)
    for seed in range(20):
        text, toks, nxt = docs.build(seed % 3, 10 ** 6, random.Random(seed))
        assert toks[0] == BOS and toks.count(BOS) == 1
        assert toks == tok.encode(text), seed  # line by line equals the whole text's encoding
        assert nxt == 3
        # Chapters are separated by an empty line, as a book's text has them.
        assert text.count("\n\n") == 2 - seed % 3


def test_refrains_are_earlier_verses_of_the_same_document():
    tok = tokenizer()
    never = Documents(tok, CHAPTERS, 0.0).build(0, 10 ** 6, random.Random(1))[0]
    assert never == "\n\n".join("\n".join(c) for c in CHAPTERS) + "\n"
    seen_refrain = False
    for seed in range(30):
        text, _, _ = Documents(tok, CHAPTERS, 0.5).build(0, 10 ** 6, random.Random(seed))
        lines = [x for x in text.split("\n") if x]
        originals = [v for c in CHAPTERS for v in c]
        i = 0  # walk the originals in order; any other line is a refrain of an earlier, non-adjacent verse
        for k, line in enumerate(lines):
            if i < len(originals) and line == originals[i]:
                i += 1
                continue
            seen_refrain = True
            assert line in originals[:i - 1], (seed, line)  # never the verse just read
            assert lines[k - 1] == originals[i - 1]  # right after a verse
        assert i == len(originals)
    assert seen_refrain


def test_windows_and_cover():
    tok = tokenizer()
    docs = Documents(tok, CHAPTERS, 0.2)
    rng = random.Random(3)
    for _ in range(10):
        w = docs.window(40, rng)
        assert len(w) == 40 and w[0] == BOS
    covered = docs.cover(random.Random(4), 30, len(CHAPTERS))
    assert all(len(d) <= 30 and d[0] == BOS for d in covered)
    assert len(covered) >= len(CHAPTERS)  # every chapter starts a document or is read in one
