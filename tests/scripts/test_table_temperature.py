"""scripts/table-temperature (scripts/kellevp/table_temperature.py): the efficiency against
Original+SRAM at the same ambient, worked out by hand on three made-up points, and its one-line
errors."""
import json

import pytest

from kellevp import InputError
from kellevp.table_temperature import load, main


def point(folder, name, system, total, refresh=0.0, ambient=45.0, aware=False):
    d = folder / name
    d.mkdir()
    r = {"config": {"system": {"name": system}, "policy": {"temperature_aware": aware},
                    "tech": {"temperature_C": 105}},
         "energy_J": {"total": total, "edram_refresh": refresh, "by_component": {}},
         "sim_time_s": 1.5, "thermal": {"ambient_C": ambient, "max_C": ambient, "mean_C": ambient},
         "refresh": {"avg_failure_rate": 1e-9}}
    (d / "results.json").write_text(json.dumps(r))


def test_ratio_against_sram_at_the_same_ambient(tmp_path, capsys):
    point(tmp_path, "a", "original_sram", 200.0)
    point(tmp_path, "b", "kelle_edram", 160.0, refresh=16.0)
    point(tmp_path, "c", "kelle_edram", 100.0, ambient=85.0)  # no SRAM point at 85 C: no ratio
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [r.split(" | ") for r in out[2:]]
    assert rows[1][1:4] == ["kelle_edram", "fixed 105 C", "160"]
    assert rows[1][5] == "10.0 %" and rows[1][6] == "1.250"  # 200 / 160; 16 of 160 J
    assert rows[2][0] == "| 85" and rows[2][6] == "-"


@pytest.mark.parametrize("make,pattern", [
    (lambda p: p / "nowhere", "no such folder"),
    (lambda p: p, "no POINT/results.json in it"),
])
def test_errors(tmp_path, make, pattern):
    with pytest.raises(InputError, match=pattern):
        load(str(make(tmp_path)))


def test_not_a_results_file(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "results.json").write_text(json.dumps({"config": {}}))
    with pytest.raises(InputError, match="not a run's results.json: missing"):
        load(str(tmp_path))
