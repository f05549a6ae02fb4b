"""pytest set-up for the scripts' package (scripts/kellevp): the package on sys.path, the source
tree and the simulator (KELLE_VP, set by CTest; tests that run it are skipped without it)."""
import os
import sys

import pytest

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "scripts"))
sys.dont_write_bytecode = True
LLM_BASE = os.path.join(SRC, "scenarios", "studies", "llm.yaml")


@pytest.fixture
def kelle_vp():
    vp = os.environ.get("KELLE_VP") or os.path.join(SRC, "build", "kelle-vp")
    if not os.access(vp, os.X_OK):
        pytest.skip("no simulator (KELLE_VP)")
    return vp


@pytest.fixture
def space_file(tmp_path):
    """space_file(text, name='space') -> the path of a space file holding `text`, with {base} the
    LLM study base and {tiny} the test suite's two-layer model's overrides."""
    def make(text, name="space"):
        p = tmp_path / f"{name}.yaml"
        p.write_text(text.replace("{base}", LLM_BASE).replace("{tiny}", TINY))
        return str(p)
    return make


TINY = """
  workload.model: {name: tiny, layers: 2, hidden: 256, heads: 4, kv_heads: 4, ffn: 512, vocab: 1000}
  workload.task: none
  workload.context_len: 48
  workload.decode_len: 16
  policy.kv_budget: 24
  policy.recent_window: 8"""
