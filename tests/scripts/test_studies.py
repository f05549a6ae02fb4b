"""The scripts' study reading and the tables they print (scripts/kellevp): a study file's errors,
its points and their folders, the comparison with the paper's claims and the orderings checks, on
cases worked out by hand."""
import csv
import math
import os

import pytest

from conftest import LLM_BASE
from kellevp import InputError, cli, study_file
from kellevp.check_orderings import check_best, check_growth, check_pairs
from kellevp.check_quality_orderings import check as quality_check
from kellevp.compare_paper import load as load_main, table
from kellevp.stats import geomean
from kellevp.sweep import expand, load_study, point_id


@pytest.mark.parametrize("text,where,pattern", [
    ("base: {base}\naxes:\n  workload.batch: [1]\n  workload.batch: [2]\n", ":4", r"axes.workload.batch: duplicate key \(first given at line 3\)"),
    ("base: {base}\naxis:\n  workload.batch: [1]\n", "", r"unknown key 'axis'; did you mean 'axes'\?"),
    ("axes:\n  workload.batch: [1]\n", "", r"missing key 'base'"),
    ("base: nowhere.yaml\n", "", r"base: file 'nowhere.yaml' not found"),
    ("base: {base}\nname: ../up\n", "", r"name: expected a plain name"),
    ("base: {base}\naxes:\n  workload.batch: []\n", "", r"axes: expected a map of key.path: \[values...\]"),
    ("base: {base}\npoints: {workload.batch: 1}\n", "", r"points: expected a list of maps"),
    ("base: {base}\nquality:\n  bsae: x.yaml\n", "", r"quality: unknown key 'bsae'"),
    ("base: {base}\naxes: [\n", ":3", r"YAML syntax error"),
])
def test_study_file_errors(tmp_path, text, where, pattern):
    path = tmp_path / "study.yaml"
    path.write_text(text.replace("{base}", LLM_BASE))
    with pytest.raises(InputError) as e:
        load_study(str(path))
    assert e.value.where == f"{path}{where}", e.value
    assert __import__("re").search(pattern, e.value.message), e.value.message


def test_study_points_and_folders(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(f"base: {LLM_BASE}\noverrides:\n  workload.task: pg19\naxes:\n  system: [kelle_edram, original_sram]\n"
                    "  workload.batch: [1, 16]\npoints:\n  - {workload.model: llama2-7b}\n  - {workload.model: opt-6.7b}\n")
    name, base, overrides, axes, points, quality = load_study(str(path))
    assert (name, base, overrides, quality) == ("study", LLM_BASE, {"workload.task": "pg19"}, None)
    todo = expand(axes, points)
    # the axes' product (2 x 2), each with every point (2): 8 runs, in order
    assert len(todo) == 8
    assert todo[0] == {"system": "kelle_edram", "workload.batch": 1, "workload.model": "llama2-7b"}
    assert todo[-1] == {"system": "original_sram", "workload.batch": 16, "workload.model": "opt-6.7b"}
    assert point_id(todo[0]) == "system-kelle_edram_batch-1_model-llama2-7b"
    assert point_id({"workload.model": {"name": "tiny", "layers": 2}}) == 'model-{"name":"tiny","layers":2}'
    assert point_id({}) == "base"
    assert len({point_id(p) for p in todo}) == 8


def test_yaml12_numbers_only_where_asked(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("a: 1e3\nb: 1.5e-4\nc: 2\n")
    assert study_file.load(str(path)) == {"a": "1e3", "b": 1.5e-4, "c": 2}  # YAML 1.1: '1e3' is text
    assert study_file.load(str(path), yaml12_numbers=True) == {"a": 1000.0, "b": 1.5e-4, "c": 2}


def test_cli_helpers(tmp_path):
    assert cli.value_text(True) == "true" and cli.value_text(8.0) == "8.0" and cli.value_text({"a": 1}) == '{"a": 1}'
    assert cli.run_argv("vp", "s.yaml", "out", {"a.b": 1, "c": False}, quiet=True) == \
        ["vp", "run", "s.yaml", "-o", "out", "--force", "-q", "-p", "a.b=1", "-p", "c=false"]
    assert cli.overrides_argv([("k", 2), "x=y"]) == ["-p", "k=2", "-p", "x=y"]
    assert cli.output_folder("s", out="rel").endswith("/rel")
    assert cli.output_folder("s").endswith(os.path.join("results", "s"))
    assert cli.output_folder("s", docs=True).endswith(os.path.join("docs", "figures"))
    assert cli.flat({"a": {"b": 1, "c": "x", "d": True}, "e": 2.5}) == {"a.b": 1, "e": 2.5}
    p = str(tmp_path / "t.csv")
    cli.write_csv(p, [{"a": 1}, {"b": 2, "a": 3}])
    assert open(p).read().splitlines() == ["a,b", "1,", "3,2"]
    with pytest.raises(InputError, match="cannot write the file"):
        cli.write_csv(str(tmp_path / "no" / "t.csv"), [{"a": 1}])
    assert InputError("f:1", "k: bad\nline").line("x") == "x: error: f:1: k: bad\\nline"
    assert InputError(None, "bad").line("x") == "x: error: bad"


def test_geomean():
    assert geomean([2, 8]) == pytest.approx(4)
    assert geomean([2, 8], [3, 1]) == pytest.approx(math.exp((3 * math.log(2) + math.log(8)) / 4))
    assert math.isnan(geomean([])) and geomean([1, 0]) is None and geomean([1, None]) is None


def write_main(tmp_path, rows):
    path = tmp_path / "results.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["workload.model", "workload.task", "system", "latency_s.total",
                                          "throughput.tokens_per_J"])
        w.writeheader()
        for model, task, system, lat, tpj in rows:
            w.writerow({"workload.model": model, "workload.task": task, "system": system, "latency_s.total": lat,
                        "throughput.tokens_per_J": tpj})
    return str(path)


# Two points, two systems each worked out by hand: Kelle+eDRAM 4x and 1x as fast as Original+SRAM
# (geometric mean 2x), 2x and 8x as efficient (mean 4x).
MAIN = [("m", "lambada", "original_sram", 8.0, 1.0), ("m", "lambada", "kelle_edram", 2.0, 2.0),
        ("m", "pg19", "original_sram", 5.0, 1.0), ("m", "pg19", "kelle_edram", 5.0, 8.0)]


def test_comparison_with_the_paper(tmp_path):
    by = load_main(write_main(tmp_path, MAIN))
    rows = {r[0]: r for r in table(by)}
    name, n, paper_speed, speed, paper_eff, eff = rows["Kelle+eDRAM vs Original+SRAM"]
    assert (n, paper_speed, paper_eff) == (2, 3.94, 4.46)
    assert speed == pytest.approx(2.0) and eff == pytest.approx(4.0)
    assert rows["AEP+SRAM vs Original+SRAM"][1] == 0  # no point where both ran


def test_orderings(tmp_path):
    by = load_main(write_main(tmp_path, MAIN))
    pairs = {r[0]: r for r in check_pairs(by, 0.005)}
    # speedup 4x and 1x: the mean (2x) keeps "better", the pg19 point does not
    name, n, g, verdict, bad = pairs["Kelle+eDRAM better than Original+SRAM (speedup)"]
    assert (n, verdict, [k for k, _ in bad]) == (2, "mean only", ["m pg19"]) and g == pytest.approx(2)
    assert pairs["Kelle+eDRAM better than Original+SRAM (efficiency)"][3] == "holds"
    assert pairs["AEP+SRAM better than Original+SRAM (speedup)"][3] == "fails"  # not run: nothing holds
    # growth with the decode length: lambada 4x, then pg19 1x, a fall
    name, n, _, verdict, bad = check_growth(by, 0.005)
    assert verdict == "fails" and bad[0][0] == "m lambada -> pg19" and bad[0][1] == pytest.approx(0.25)
    best = {r[0]: r[3] for r in check_best(by, 0.005)}
    assert best == {"Kelle+eDRAM the best of the systems at every point (speedup)": "fails",
                    "Kelle+eDRAM the best of the systems at every point (efficiency)": "holds"}


def test_quality_orderings():
    # StreamingLLM at N' 64 and 128 with 0, 4 and 8 sinks; H2O and the window; full cache 10.
    runs = {("streaming", 64, 0): 30.0, ("streaming", 64, 4): 12.0, ("streaming", 64, 8): 11.5,
            ("streaming", 128, 0): 25.0, ("streaming", 128, 4): 11.0, ("streaming", 128, 8): 10.8,
            ("streaming", 64, 10): 12.0, ("streaming", 128, 10): 10.9, ("streaming", 512, 10): 10.2,
            ("h2o", 64, 0): 11.0, ("h2o", 128, 0): 10.8, ("h2o", 512, 0): 10.15}
    out = quality_check(runs, 10.0, 1024, 0.005, "perplexity")
    verdicts = {k: ("holds" if v[1] and not v[2] else "fails" if v[1] else "not run") for k, v in out.items()}
    # S1-S4 hold by construction (30 > 12; 30 > 2 x 10; 12 - 10 <= half of 20; |11.5 - 12| < 18);
    # H1: H2O beats the window at N' 64 and 128 (64 x 8 and 128 x 8 <= 1024 positions);
    # H2: the window's excess over H2O shrinks 1.0 -> 0.1 -> 0.05, below a quarter;
    # H3: both close on the full cache (10.2 and 10.15 within 10 %)
    assert verdicts == {k: "holds" for k in ("S1", "S2", "S3", "S4", "H1", "H2", "H3")}, out
    runs[("streaming", 64, 0)] = 11.9  # no collapse, and no better than with 4 sinks
    out = quality_check(runs, 10.0, 1024, 0.005, "perplexity")
    assert out["S1"][2] and out["S2"][2] and not out["H1"][2]


def test_overlay_options(tmp_path):
    """--overlay: the files go to kelle-vp before the -p's, absolute; a missing one is one line."""
    over = tmp_path / "o.yaml"
    over.write_text("tech: {}\n")
    files = cli.overlay_files([str(over)])
    assert files == [str(over)]
    argv = cli.run_argv("vp", "s.yaml", "out", [("a.b", 1)], overlays=files)
    assert argv == ["vp", "run", "s.yaml", "-o", "out", "--force", "--overlay", str(over), "-p", "a.b=1"]
    with pytest.raises(InputError) as e:
        cli.overlay_files([str(tmp_path / "absent.yaml")])
    assert e.value.where == f"--overlay {tmp_path / 'absent.yaml'}"
    assert "no such file" in e.value.message


@pytest.fixture
def overlay_study(tmp_path):
    """(overlay file, study file of the two-layer model at 2 decode steps on SYSTEMS) for --overlay."""
    from conftest import TINY
    over = tmp_path / "o.yaml"
    over.write_text("tech:\n  lpddr4:\n    read_energy_pJ_per_bit: 22.93\n")

    def study(systems):
        path = tmp_path / "s.yaml"
        path.write_text(f"name: s\nbase: {LLM_BASE}\noverrides:{TINY.replace('decode_len: 16', 'decode_len: 2')}\n"
                        f"axes:\n  system: [{', '.join(systems)}]\n")
        return str(path)
    return str(over), study


def test_sweep_overlay_reaches_every_point(tmp_path, kelle_vp, overlay_study):
    """scripts/sweep --overlay: every point runs with it (results.json names it, the value it sets
    is the run's), on the two-layer model."""
    import json
    from kellevp.sweep import main as sweep
    over, study = overlay_study
    out = tmp_path / "out"
    assert sweep([study(["kelle_edram", "original_sram"]), "--out", str(out), "--workers", "2", "--kelle-vp", kelle_vp,
                  "--overlay", over]) == 0
    for system in ("kelle_edram", "original_sram"):
        r = json.load(open(out / f"system-{system}" / "results.json"))
        assert r["scenario"]["overlays"] == [over]
        assert r["config"]["tech"]["lpddr4"]["read_energy_pJ_per_bit"] == 22.93


def test_sweep_reruns_a_point_made_with_other_overlays(tmp_path, kelle_vp, overlay_study):
    """A results folder made without an overlay is not taken as done by a sweep with one."""
    import json
    from kellevp.sweep import main as sweep
    over, study = overlay_study
    out = tmp_path / "out"
    common = [study(["kelle_edram"]), "--out", str(out), "--workers", "1", "--kelle-vp", kelle_vp]
    assert sweep(common) == 0
    path = out / "system-kelle_edram" / "results.json"
    assert json.load(open(path))["scenario"]["overlays"] == []
    assert sweep(common + ["--overlay", over]) == 0
    assert json.load(open(path))["scenario"]["overlays"] == [over]
