"""A property of scripts/explore (Debian's python3-hypothesis): whatever space file it is given,
the outcome is a run (exit status 0) or one line `explore: error: ...` with exit status 2; never a
traceback, a hang, or another exit status. The space files are generated from the space's own keys
with values good, bad and hostile (non-finite numbers, huge integers, text where numbers go,
expressions with towers, names in arithmetic and divisions by zero), and some are then cut or
garbled as text. Each run screens at most 4 trials of the test suite's two-layer model.

KELLE_PROPERTY_EXAMPLES sets how many spaces (default 40: about a minute); the longer runs of
docs/explore.md set it higher.
"""
import contextlib
import io
import os
import re

import pytest
import yaml

from conftest import LLM_BASE, SRC

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings, strategies as st  # noqa: E402

from kellevp.explore import main  # noqa: E402
from kellevp.space import OBJECTIVES, SAMPLERS  # noqa: E402

TINY = {"workload.model": {"name": "tiny", "layers": 2, "hidden": 256, "heads": 4, "kv_heads": 4, "ffn": 512,
                           "vocab": 1000},
        "workload.task": "none", "workload.context_len": 48, "workload.decode_len": 16, "policy.kv_budget": 24,
        "policy.recent_window": 8}
KEYS = ["system.compute.rsa.rows", "system.compute.rsa.cols", "system.memories.kv_edram.capacity_MiB",
        "system.memories.weight_sram.capacity_MiB", "policy.refresh", "workload.batch", "system.compute.rsa.rowz",
        "policy.kv_budget", "", "a=b", "system"]

weird_numbers = st.one_of(st.integers(-10, 100), st.integers(-2 ** 70, 2 ** 70),
                          st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0, 0.0, -0.0, 1e-300, 1e300]))
scalars = st.one_of(weird_numbers, st.booleans(), st.none(), st.sampled_from(["2drp", "uniform", "1e3", "", "x"]),
                    st.text(max_size=8))
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=4), scalars, max_size=2))
good_choices = st.sampled_from([[8, 16], [8, 16, 32], ["2drp", "uniform"], [0.25, 0.5], [1]])
param_spec = st.one_of(
    st.fixed_dictionaries({"choices": st.one_of(good_choices, st.lists(scalars, max_size=4), values)}),
    st.fixed_dictionaries({"range": st.one_of(st.sampled_from([[8, 32], [0.25, 1.0], [1, 2 ** 40]]),
                                              st.lists(weird_numbers, min_size=0, max_size=3), values)},
                          optional={"step": st.one_of(st.sampled_from([8, 0.25, 3]), weird_numbers),
                                    "log": st.one_of(st.booleans(), scalars)}),
    values)
refs = st.sampled_from(["${system.compute.rsa.rows}", "${policy.refresh}", "${nope}", "2", "0", "1e999", "-1",
                        "${system.memories.kv_edram.capacity_MiB}", "(", "__import__('os')"])
ops = st.sampled_from([" + ", " - ", " * ", " / ", " // ", " % ", " ** "])
expr = st.recursive(refs, lambda inner: st.one_of(
    st.tuples(inner, ops, inner).map(lambda t: "".join(t)),
    st.tuples(st.sampled_from(["min", "max", "round", "int", "float", "abs"]), st.lists(inner, max_size=3)).map(
        lambda t: f"{t[0]}({', '.join(t[1])})"),
    inner.map(lambda e: f"({e})")), max_leaves=12)
workload = st.dictionaries(st.sampled_from(["workload.batch", "weight", "label", "workload.model", "system"]),
                           st.one_of(st.integers(0, 4), scalars), min_size=0, max_size=3)
VALID = {"name": "p", "base": LLM_BASE, "overrides": TINY, "workloads": [{"workload.batch": 1}],
         "objectives": ["latency", "energy_per_token"],
         "parameters": {"system.compute.rsa.rows": {"choices": [8, 16]}, "policy.refresh": {"choices": ["2drp", "uniform"]},
                        "system.memories.weight_sram.capacity_MiB": {"range": [0.25, 0.5], "step": 0.25}},
         "derived": {"system.compute.rsa.cols": "${system.compute.rsa.rows}"},
         "search": {"population": 4, "seed": 3}}
PARAM = "system.memories.weight_sram.capacity_MiB"
# Where a mutation puts a value, and the values it may put there.
mutation = st.one_of(
    st.tuples(st.just(("name",)), st.one_of(st.just("q"), scalars)),
    st.tuples(st.just(("base",)), st.sampled_from(["missing.yaml", "space.yaml", 3, "",
                                                   os.path.join(SRC, "scenarios", "microbench", "dram_stream.yaml")])),
    st.tuples(st.sampled_from(KEYS).map(lambda k: ("parameters", k)), param_spec),
    st.tuples(st.just(("parameters", "system.compute.rsa.rows", "choices")),
              st.one_of(good_choices, st.lists(scalars, max_size=4), values)),
    st.tuples(st.just(("parameters", PARAM, "range")),
              st.one_of(st.lists(weird_numbers, max_size=3), st.sampled_from([[0.25, 1], [1e-3, 1e3]]), values)),
    st.tuples(st.just(("parameters", PARAM, "step")), st.one_of(weird_numbers, st.sampled_from([0.125, 0.3]))),
    st.tuples(st.just(("parameters", PARAM, "log")), st.one_of(st.booleans(), scalars)),
    st.tuples(st.sampled_from(KEYS).map(lambda k: ("derived", k)), st.one_of(expr, scalars)),
    st.tuples(st.sampled_from(["workload.batch", "weight", "label", "workload.model", "system"]).map(
        lambda k: ("workloads", 0, k)), st.one_of(st.integers(0, 4), scalars)),
    st.tuples(st.just(("workloads",)), st.one_of(st.lists(workload, max_size=2), values)),
    st.tuples(st.just(("objectives",)), st.one_of(st.lists(st.sampled_from(list(OBJECTIVES) + ["latncy"]),
                                                           min_size=1, max_size=3), values)),
    st.tuples(st.sampled_from(["area_mm2_max", "dram_fit", "quality_loss_max", "quality_command"]).map(
        lambda k: ("constraints", k)),
              st.one_of(weird_numbers, st.booleans(), st.sampled_from(
                  ["echo 0.1", "echo nan", "false", "no-such-prog", "echo x", "sh -c 'exit 3'", "'unbalanced"]))),
    st.tuples(st.sampled_from(["sampler", "trials", "population", "seed", "batch", "margin", "rounds",
                               "max_simulated", "smapler"]).map(lambda k: ("search", k)),
              st.one_of(st.sampled_from(SAMPLERS), weird_numbers, scalars)),
    st.tuples(st.just(("references",)), st.one_of(st.lists(st.fixed_dictionaries(
        {"label": st.sampled_from(["x", "y"]),
         "overrides": st.dictionaries(st.sampled_from(["system", "workload.model", "system.compute.rsa.rowz"]),
                                      st.sampled_from(["kelle_edram", "original_sram", "kelle_sram", "llama9", 8]),
                                      max_size=1)}), max_size=2), values)),
    st.tuples(st.sampled_from(KEYS).map(lambda k: ("overrides", k)), values),
    st.tuples(st.sampled_from(["nonsense", "parameters", "derived", "search", "constraints"]).map(lambda k: (k,)),
              values))


def mutated(changes):
    """The valid space with each (key path, value) put in: the last key set, any map on the way made."""
    import copy
    doc = copy.deepcopy(VALID)
    for path, value in changes:
        node = doc
        for k in path[:-1]:
            if isinstance(node, list):
                if not node:
                    node.append({})
                node = node[0]
                continue
            if not isinstance(node.get(k), (dict, list)):
                node[k] = {}
            node = node[k]
        if isinstance(node, dict):
            node[path[-1]] = value
    return doc


space = st.one_of(st.just([]), st.lists(mutation, min_size=1, max_size=1), st.lists(mutation, max_size=3)).map(mutated)
# What is done to the text: nothing (most), cut at a point, a character put in.
garble = st.one_of(st.just(None), st.just(None), st.just(None), st.tuples(st.just("cut"), st.floats(0, 1)),
                   st.tuples(st.sampled_from([":", "-", "{", "\t", "&a", "*a", "!!python/object:os.system"]),
                             st.floats(0, 1)))

EXAMPLES = int(os.environ.get("KELLE_PROPERTY_EXAMPLES", "40"))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 40, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(doc=space, mangle=garble)
def test_any_space_runs_or_fails_in_one_line(kelle_vp, tmp_path_factory, doc, mangle):
    folder = tmp_path_factory.mktemp("space")
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        return
    if mangle is not None:
        at = int(mangle[1] * len(text))
        text = text[:at] if mangle[0] == "cut" else text[:at] + mangle[0] + text[at:]
    path = folder / "space.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(path), "--out", str(folder / "out"), "--kelle-vp", kelle_vp, "--workers", "1",
                       "--trials", "4", "--no-simulate"])
        except SystemExit as e:  # argparse's own errors
            rc = e.code
    lines = err.getvalue().splitlines()
    # what kinds of outcome the spaces reach (pytest --hypothesis-show-statistics)
    words = lines[0].split(": ") if rc == 2 and lines else []
    event("a run" if rc == 0 else "refused: " + (re.split(r"[.\[ ]", words[3])[0] if len(words) > 3 else "?"))
    assert rc in (0, 2), f"exit status {rc}\n{text}\n{err.getvalue()}"
    if rc == 2:
        assert len(lines) == 1 and lines[0].startswith("explore: error: "), f"{text}\n{err.getvalue()}"
