"""scripts/explore's input checks that need the simulator (kelle-vp check and estimate) and its
results folder: each bad input one line `explore: error: WHERE: MESSAGE`, exit status 2, nothing
searched; a resumed search continues only the same search."""
import json
import os
import re

import pytest

from conftest import SRC
from kellevp.explore import main

SPACE = """name: {name}
base: {base}
overrides:{tiny}
workloads:
  - {workload.batch: 1}
objectives: [latency, energy_per_token]
parameters:
  system.compute.rsa.rows: {choices: [8, 16]}
  policy.refresh: {choices: [2drp, uniform]}
search:
  population: 4
  seed: 3
"""  # parameters at lines 13-15, search at 16-18: a test's text starts at line 19


def explore(args, capsys):
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err.strip()


def refused(capsys, args, where, pattern):
    rc, out, err = explore(args, capsys)
    assert rc == 2, (rc, out, err)
    assert "\n" not in err and err.startswith("explore: error: "), err
    assert err.startswith(f"explore: error: {where}: "), err
    assert re.search(pattern, err), err
    return err


@pytest.fixture
def run(kelle_vp, tmp_path, space_file, capsys):
    """run(extra_text, args, where_line, pattern, name) -> the error line of a refused search."""
    def go(extra, pattern, line=None, args=(), name="t", where=None):
        path = space_file(SPACE.replace("{name}", name) + extra, name)
        w = where if where is not None else f"{path}:{line}"
        return refused(capsys, [path, "--out", str(tmp_path / "out"), "--kelle-vp", kelle_vp, "--workers", "1",
                                "--trials", "4", "--no-simulate", *args], w, pattern)
    return go


def test_derived_text_where_a_whole_number_goes(run):
    run("derived:\n  system.compute.rsa.cols: '${policy.refresh}'\n",
        r"derived.system.compute.rsa.cols = 2drp \(with policy.refresh=2drp\): .*system.compute.rsa.cols.*expected",
        line=20)


def test_derived_real_where_a_whole_number_goes(run):
    run("derived:\n  system.compute.rsa.cols: '${system.compute.rsa.rows} / 3'\n",
        r"derived.system.compute.rsa.cols = 2.66+5? \(with .*expected .*a whole number", line=20)


def test_base_not_an_llm_scenario(kelle_vp, tmp_path, space_file, capsys):
    micro = os.path.join(SRC, "scenarios", "microbench", "dram_stream.yaml")
    path = space_file(SPACE.replace("{name}", "t").replace("{base}", micro), "micro")
    refused(capsys, [path, "--out", str(tmp_path / "out"), "--kelle-vp", kelle_vp, "--no-simulate"], f"{path}:2",
            r"base: .*dram_stream.yaml is not an LLM scenario: "
            r".*LLM inference")
    assert not os.path.exists(tmp_path / "out"), "a refused search wrote its results folder"


def test_every_design_infeasible_says_why(run):
    run("constraints:\n  area_mm2_max: 0.001\n",
        r"constraints.area_mm2_max: no feasible design among the \d+ screened: the first, \{.*\}, has [0-9.]+ mm2 of "
        r"area, more than 0.001", line=20)


@pytest.mark.parametrize("ref,pattern", [
    ("{system: kelle_sram}", r"references\[0\] \(x\) on workloads\[0\]: .*kelle_sram"),
    ("{workload.model: llama9-7b}", r"references\[0\] \(x\) on workloads\[0\]: .*llama9-7b"),
    ("{system.compute.rsa.rowz: 8}", r"references\[0\] \(x\) on workloads\[0\]: .*unknown key 'system.compute.rsa.rowz'"),
])
def test_reference_that_does_not_exist(run, ref, pattern):
    run(f"references:\n  - {{label: x, overrides: {ref}}}\n", pattern, line=20)


def test_derived_key_unknown(run):
    run("derived:\n  system.compute.rsa.colz: '${system.compute.rsa.rows}'\n",
        r"derived.system.compute.rsa.colz = 8 .*unknown key 'system.compute.rsa.colz'", line=20)


def test_quality_command_missing(run):
    run("constraints:\n  quality_loss_max: 0.5\n  quality_command: scripts/no-such-command --x\n",
        r"constraints.quality_command: 'scripts/no-such-command' is not a program", line=21)
    run("constraints:\n  quality_loss_max: 0.5\n  quality_command: no-such-command-anywhere\n",
        r"constraints.quality_command: 'no-such-command-anywhere' is not a program \(looked on PATH\)", line=21)


def test_quality_command_fails(run):
    run("constraints:\n  quality_loss_max: 0.5\n  quality_command: \"sh -c 'echo boom >&2; exit 3'\"\n",
        r"constraints.quality_command: .* failed \(exit status 3\) on the design \{.*\}: boom", line=21)


@pytest.mark.parametrize("printed", ["nan", "inf", "-inf", "a lot", ""])
def test_quality_command_prints_no_finite_loss(run, printed):
    run(f"constraints:\n  quality_loss_max: 0.5\n  quality_command: \"echo '{printed}'\"\n",
        r"constraints.quality_command: expected a finite number on its last line, got '.*' on the design", line=21)


@pytest.mark.parametrize("args,where,pattern", [
    (["--trials", "0"], "--trials", r"expected a whole number from 1 to 1,000,000, got 0"),
    (["--workers", "0"], "--workers", r"expected a whole number from 1 to 1024, got 0"),
    (["--seed", "-1"], "--seed", r"expected a whole number from 0 to 4294967295"),
    (["--seed", "4294967295", "--workers", "2"], "--seed", r"search.seed: 4294967295 \+ 1000 x 1 .*at most 4294966295"),
])
def test_options_out_of_range(run, args, where, pattern):
    run("", pattern, args=args, where=where)


def test_results_folder_guarded(kelle_vp, tmp_path, space_file, capsys):
    out = str(tmp_path / "out")
    a = space_file(SPACE.replace("{name}", "a"), "a")
    base = [out, "--kelle-vp", kelle_vp, "--workers", "1", "--no-simulate"]
    rc, text, err = explore([a, "--out", *base, "--trials", "4"], capsys)
    assert rc == 0, err
    with open(os.path.join(out, "search.json")) as f:
        rec = json.load(f)
    assert rec["identity"]["name"] == "a"
    # the same search resumes, with more trials (said as a change it may make)
    rc, text, err = explore([a, "--out", *base, "--trials", "10"], capsys)
    assert rc == 0, err
    assert "resuming with trials 10 (was 4)" in text and re.search("; [4-9] of 10 trials done", text), text
    # another space's search, or this one's with a changed space, is refused with what differs
    b = space_file(SPACE.replace("{name}", "b"), "b")
    refused(capsys, [b, "--out", *base], "--out", r"holds the search 'a' of .*a.yaml with another space or settings "
            r"\(name: \"a\" there, \"b\" here\); a results folder resumes only the same search")
    a2 = space_file(SPACE.replace("{name}", "a").replace("[8, 16]", "[8, 32]"), "a")
    refused(capsys, [a2, "--out", *base], "--out", r"parameters.system.compute.rsa.rows.choices: \[\"8\", \"16\"\] there, "
            r"\[\"8\", \"32\"\] here")
    refused(capsys, [a, "--out", *base, "--sampler", "tpe"], "--out", r"search.sampler: \"nsga2\" there, \"tpe\" here")
    refused(capsys, [a, "--out", *base, "--storage", "sqlite"], "--out", r"storage: \"journal\" there, \"sqlite\" here")
    # a folder with someone else's files and no record is refused, and left as it was
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    refused(capsys, [a, "--out", str(other), "--kelle-vp", kelle_vp, "--no-simulate"], "--out",
            r"holds files but no search.json: not this search's results")
    assert os.listdir(other) == ["notes.txt"]
    # --out naming a file
    refused(capsys, [a, "--out", str(other / "notes.txt"), "--kelle-vp", kelle_vp], "--out", r"is a file")


def test_grid_study_overwrites_only_its_own_file(tmp_path, space_file, capsys):
    a = space_file(SPACE.replace("{name}", "a"), "a")
    refused(capsys, [a, "--write-grid-study", a], "--write-grid-study",
            r"exists and was not written by --write-grid-study")
    g = str(tmp_path / "grid.yaml")
    for _ in range(2):  # written, then written again (its own file)
        rc, text, err = explore([a, "--write-grid-study", g], capsys)
        assert rc == 0 and "4 designs x 1 workloads" in text, err
    with open(g) as f:
        assert len(__import__("yaml").safe_load(f)["points"]) == 4
