"""The space file reader (scripts/kellevp/space.py): each kind of bad input is one InputError
naming the file and line, the key path and what was expected; good files read as written."""
import re
import time

import pytest

from kellevp import InputError
from kellevp.space import Expr, load_space

HEAD = """base: {base}
workloads: [{workload.batch: 1}]
objectives: [latency, area]
"""
ROWS = "parameters:\n  system.compute.rsa.rows: {choices: [8, 16]}\n"  # lines 4 and 5

BAD = [
    # non-finite numbers wherever a number goes
    ("inf_choice", HEAD + "parameters:\n  system.compute.rsa.rows: {choices: [8, .inf]}\n", 5,
     r"parameters.system.compute.rsa.rows.choices\[1\]: expected a number, got inf \(not a finite number\)"),
    ("nan_range", HEAD + "parameters:\n  system.compute.rsa.rows: {range: [.nan, 16]}\n", 5,
     r"parameters.system.compute.rsa.rows.range\[0\]: expected a number, got nan \(not a finite number\)"),
    ("inf_step", HEAD + "parameters:\n  system.memories.weight_sram.capacity_MiB: {range: [0.5, 2], step: .inf}\n", 5,
     r"parameters.system.memories.weight_sram.capacity_MiB.step: expected a number > 0, got inf"),
    ("inf_override", HEAD + ROWS + "overrides:\n  workload.context_len: .inf\n", 7,
     r"overrides.workload.context_len: expected a finite number, got inf"),
    ("nan_weight", "base: {base}\nworkloads:\n  - {workload.batch: 1, weight: .nan}\nobjectives: [latency]\n" + ROWS, 3,
     r"workloads\[0\].weight: expected a number > 0, got nan"),
    ("inf_margin", HEAD + ROWS + "search:\n  margin: .inf\n", 7, r"search.margin: expected a number from 0 to 10"),
    ("inf_area", HEAD + ROWS + "constraints:\n  area_mm2_max: .inf\n", 7, r"constraints.area_mm2_max: expected a number"),
    ("derived_inf_constant", HEAD + ROWS + "derived:\n  system.compute.rsa.cols: '${system.compute.rsa.rows} * 1e999'\n",
     7, r"derived.system.compute.rsa.cols: .*a number that is not finite"),
    # derived expressions: bounded, numbers only, no division by zero
    ("derived_tower", HEAD + ROWS + "derived:\n  system.compute.rsa.cols: '9 ** 9 ** 9 ** 9'\n", 7,
     r"derived.system.compute.rsa.cols: '9 \*\* 9 \*\* 9 \*\* 9' is out of range \(9 \*\* 387420489 exceeds 1e18\)"),
    ("derived_big_int", HEAD + ROWS + "derived:\n  system.compute.rsa.cols: '${system.compute.rsa.rows} ** 100000'\n",
     7, r"derived.system.compute.rsa.cols: .* is out of range \(8 \*\* 100000 exceeds 1e18\) \(with system.compute.rsa.rows=8\)"),
    ("derived_name_arithmetic", HEAD + "parameters:\n  policy.refresh: {choices: [2drp, uniform]}\n"
     "derived:\n  system.compute.rsa.cols: '${policy.refresh} * 2'\n", 7,
     r"derived.system.compute.rsa.cols: .* uses '\$\{policy.refresh\}' in arithmetic, but its value is a name \('2drp'\)"),
    ("derived_zero_division", HEAD + ROWS + "derived:\n  system.compute.rsa.cols: '64 // (${system.compute.rsa.rows} - 8)'\n",
     7, r"derived.system.compute.rsa.cols: .* divides by zero \(64 // 0\) \(with system.compute.rsa.rows=8\)"),
    ("derived_call", HEAD + ROWS + "derived:\n  system.compute.rsa.cols: '__import__(\"os\")'\n", 7,
     r"derived.system.compute.rsa.cols: .*only numbers, \$\{key\} references"),
    ("derived_attribute", HEAD + ROWS + "derived:\n  system.compute.rsa.cols: '(1).real'\n", 7,
     r"derived.system.compute.rsa.cols: .*only numbers"),
    ("derived_unknown_ref", HEAD + ROWS + "derived:\n  system.compute.rsa.cols: '${rows}'\n", 7,
     r"derived.system.compute.rsa.cols: '\$\{rows\}' is not a parameter"),
    ("derived_long", HEAD + ROWS + "derived:\n  system.compute.rsa.cols: '" + "+".join(["1"] * 600) + "'\n", 7,
     r"derived.system.compute.rsa.cols: the expression has 1199 characters, at most 1000"),
    ("derived_nested", HEAD + ROWS + "derived:\n  system.compute.rsa.cols: '" + "(" * 400 + "1" + ")" * 400 + "'\n", 7,
     r"derived.system.compute.rsa.cols: .*(nested|terms, at most)"),
    ("derived_float_to_int", HEAD + ROWS + "derived:\n  system.compute.rsa.cols: 'int(1e300)'\n", 7,
     r"derived.system.compute.rsa.cols: .*out of range"),
    ("derived_null", HEAD + ROWS + "derived:\n  system.compute.rsa.cols:\n", 7,
     r"derived.system.compute.rsa.cols: expected an expression"),
    # grids and steps
    ("step_not_dividing", HEAD + "parameters:\n  system.memories.weight_sram.capacity_MiB: {range: [0, 1], step: 0.35}\n",
     5, r"step: 0.35 does not divide the range \[0, 1\] .*its last value would be 0.7, not 1"),
    ("int_step_not_dividing", HEAD + "parameters:\n  system.compute.rsa.rows: {range: [8, 64], step: 10}\n", 5,
     r"step: 10 does not divide the range \[8, 64\] .*its last value would be 58, not 64"),
    ("step_wider_than_range", HEAD + "parameters:\n  system.memories.weight_sram.capacity_MiB: {range: [0.25, 0.5], "
     "step: 845541638406144.0}\n", 5, r"step: 845541638406144.0 does not divide the range \[0.25, 0.5\]"),
    ("step_binary_fraction", HEAD + "parameters:\n  system.memories.weight_sram.capacity_MiB: {range: [0.25, 0.5], "
     "step: 5.960464477539063e-08}\n", 5, r"step: 5.960464477539063e-08 does not divide"),
    ("step_tiny", HEAD + "parameters:\n  system.memories.weight_sram.capacity_MiB: {range: [0.25, 0.5], step: 1e-300}\n",
     5, r"step: 1e-300 makes 2.5e\+299 values of \[0.25, 0.5\], at most 1e\+12"),
    ("huge_grid", HEAD + "parameters:\n  system.compute.rsa.rows: {range: [1, 100000000]}\n"
     "  system.compute.rsa.cols: {range: [1, 1000]}\nsearch:\n  sampler: grid\n", 4,
     r"parameters: search.sampler grid: the grid has 100,000,000,000 designs \(100000000 x 1000\), at most 100,000"),
    ("grid_continuous", HEAD + "parameters:\n  system.memories.weight_sram.capacity_MiB: {range: [0.5, 2]}\n"
     "search:\n  sampler: grid\n", 5, r"capacity_MiB: search.sampler grid needs choices or a range with a step"),
    ("huge_whole", HEAD + "parameters:\n  system.compute.rsa.rows: {range: [1, 100000000000000000000]}\n", 5,
     r"range\[1\]: expected a number of at most 2\^53 in magnitude"),
    ("range_text", HEAD + "parameters:\n  system.compute.rsa.rows: {range: [8, sixteen]}\n", 5,
     r"range\[1\]: expected a number, got 'sixteen'"),
    # search settings
    ("seed_too_large", HEAD + ROWS + "search:\n  seed: 4294967296\n", 7,
     r"search.seed: expected a whole number from 0 to 4,294,967,295, got 4294967296"),
    ("seed_negative", HEAD + ROWS + "search:\n  seed: -1\n", 7, r"search.seed: expected a whole number from 0"),
    ("trials_zero", HEAD + ROWS + "search:\n  trials: 0\n", 7, r"search.trials: expected a whole number from 1 to 1,000,000"),
    ("trials_huge", HEAD + ROWS + "search:\n  trials: 1e12\n", 7, r"search.trials: expected a whole number .* got 1000000000000.0"),
    ("population_one", HEAD + ROWS + "search:\n  population: 1\n", 7, r"search.population: expected a whole number from 2"),
    ("rounds_text", HEAD + ROWS + "search:\n  rounds: two\n", 7, r"search.rounds: expected a whole number from 1 to 100, got 'two'"),
    ("sampler_typo", HEAD + ROWS + "search:\n  sampler: nsga\n", 7, r"search.sampler: expected one of .*did you mean 'nsga2'"),
    # the base
    ("base_itself", "base: space.yaml\nworkloads: [{workload.batch: 1}]\nobjectives: [latency]\n" + ROWS, 1,
     r"base: names this space file itself"),
    ("base_missing", "base: nowhere.yaml\nworkloads: [{workload.batch: 1}]\nobjectives: [latency]\n" + ROWS, 1,
     r"base: file 'nowhere.yaml' not found"),
    # keys and references
    ("key_with_equals", HEAD + "parameters:\n  'workload.batch=2': {choices: [1]}\n", 5, r"expected a scenario key path"),
    ("reference_unknown_key", HEAD + ROWS + "references:\n  - {label: a, overides: {system: kelle_edram}}\n", 7,
     r"references\[0\].overides: unknown key; did you mean 'overrides'"),
    ("reference_same_label", HEAD + ROWS + "references:\n  - {label: a}\n  - {label: a}\n", 6,
     r"references: two references have the same label"),
    ("quality_command_empty", HEAD + ROWS + "constraints:\n  quality_loss_max: 0.1\n  quality_command: ''\n", 8,
     r"constraints.quality_command: needed by quality_loss_max"),
]


@pytest.mark.parametrize("name,text,line,pattern", BAD, ids=[b[0] for b in BAD])
def test_bad_space(space_file, name, text, line, pattern):
    path = space_file(text)
    t0 = time.time()
    with pytest.raises(InputError) as e:
        load_space(path)
    assert time.time() - t0 < 2, "an error takes longer than a bounded reader may"
    assert e.value.where == f"{path}:{line}", e.value
    assert re.search(pattern, e.value.message), e.value.message
    assert "\n" not in str(e.value)


def test_good_space(space_file):
    sp = load_space(space_file(HEAD + """parameters:
  system.compute.rsa.rows: {range: [8, 64], step: 8}
  system.memories.weight_sram.capacity_MiB: {range: [1e-1, 1.5e0], step: 2e-1}
  system.memories.kv_edram.bandwidth_GBps: {range: [1e2, 1e3], log: true}
  policy.refresh: {choices: [2drp, uniform]}
derived:
  system.compute.rsa.cols: "min(64, 2 * ${system.compute.rsa.rows})"
  system.memories.kv_edram.banks: "${policy.refresh}"
"""))
    rows, sram, bw, refresh = sp.params
    assert (rows.kind, rows.count(), list(rows.values())[-1]) == ("int", 8, 64)
    # YAML 1.2 exponent forms (1e-1) are numbers, as in the scenarios kelle-vp reads
    assert (sram.kind, sram.low, sram.high, sram.count()) == ("float", 0.1, 1.5, 8)
    assert max(sram.values()) <= 1.5
    assert (bw.low, bw.high, bw.log, bw.count()) == (100.0, 1000.0, True, None)
    assert sp.grid_size() is None
    d = sp.design({"system.compute.rsa.rows": 40, "system.memories.weight_sram.capacity_MiB": 0.3,
                   "system.memories.kv_edram.bandwidth_GBps": 500.0, "policy.refresh": "uniform"})
    assert d["system.compute.rsa.cols"] == 64 and d["system.memories.kv_edram.banks"] == "uniform"
    assert rows.neighbours(40) == [32, 48] and rows.neighbours(8) == [16] and rows.neighbours(41) == []
    assert refresh.neighbours("2drp") == ["uniform"]
    assert sram.neighbours(0.3) == [pytest.approx(0.1), pytest.approx(0.5)]


def test_expression_bounds():
    known = ["a", "b"]
    e = Expr("${a} ** ${b} + max(${a}, 3) // 2 - abs(-${b}) % 5 + round(${a} / 3, 2)", known, "f:1", "derived.k")
    assert e({"a": 2, "b": 10}) == 2 ** 10 + 1 - 0 + 0.67
    assert Expr("${a}", known, "f:1", "derived.k")({"a": "2drp"}) == "2drp"
    for text, values, pattern in [("${a} ** ${b}", {"a": 10, "b": 19}, "exceeds 1e18"),
                                  ("${a} ** ${b}", {"a": 0, "b": -1}, "divides by zero"),
                                  ("${a} ** ${b}", {"a": -8, "b": 0.5}, "negative number to a fractional power"),
                                  ("${a} % ${b}", {"a": 1, "b": 0}, "divides by zero"),
                                  ("${a} * ${b}", {"a": 1e10, "b": 1e10}, "out of range"),
                                  ("${a} + 1", {"a": True, "b": 1}, "its value is a boolean"),
                                  ("round(${a}, ${b})", {"a": 1, "b": 10 ** 6}, "number of digits")]:
        with pytest.raises(InputError, match=pattern):
            Expr(text, known, "f:1", "derived.k")(values)
    t0 = time.time()
    with pytest.raises(InputError):
        Expr("*".join(["${a} ** ${a}"] * 40), known, "f:1", "derived.k")({"a": 99, "b": 1})
    assert time.time() - t0 < 0.5


def test_grid_is_lazy(space_file):
    # a space with 10^12 grid points reads at once (nothing built) and samples
    sp = load_space(space_file(HEAD + "parameters:\n  system.compute.rsa.rows: {range: [1, 1000000]}\n"
                                      "  system.compute.rsa.cols: {range: [1, 1000000]}\n"))
    assert sp.grid_size() == 10 ** 12
    with pytest.raises(InputError, match="the grid has 1,000,000,000,000 designs"):
        sp.check_grid("--write-grid-study")
    assert sp.params[0].neighbours(500000) == [499999, 500001]


def test_error_is_one_line(space_file):
    # a key with a line break in it (found by the property test): the error line escapes it
    path = space_file(HEAD + 'parameters:\n  system.compute.rsa.rows: {"\\r": 0, "\\n": 1}\n')
    with pytest.raises(InputError) as e:
        load_space(path)
    line = e.value.line("explore")
    assert "\n" not in line and "\r" not in line and "\\r" in line, line


def test_decimal_steps(space_file):
    # 0.1 divides 0.3 as written (a binary float would say 0.30000000000000004 / 0.1 is not whole)
    sp = load_space(space_file(HEAD + "parameters:\n  system.memories.weight_sram.capacity_MiB: {range: [0, 0.3], step: 0.1}\n"))
    assert list(sp.params[0].values()) == [0.0, 0.1, 0.2, 0.3]
