"""The build's floor check (cmake/check_floors.py) on small fake trees: a floor violation and an
include cycle between components are each one line and fail the check; a clean tree passes,
writes the stamp and levels its components as Lakos does."""
import importlib.util
import os
import subprocess
import sys

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKER = os.path.join(SRC, "cmake", "check_floors.py")


def load():
    spec = importlib.util.spec_from_file_location("check_floors", CHECKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree(root, files):
    """Writes {path: [included paths]} under root, each file a list of quoted includes."""
    for path, includes in files.items():
        p = root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(f'#include "{i}"\n' for i in includes) + "#include <vector>\n")


def run(root):
    stamp = root / "floors.stamp"
    r = subprocess.run([sys.executable, CHECKER, str(root), str(stamp)], capture_output=True, text=True)
    return r, stamp


CLEAN = {
    "platform/base/config.h": [],
    "platform/base/config.cpp": ["platform/base/config.h"],
    "models/block/block.h": ["platform/base/config.h"],
    "models/block/block.cpp": ["models/block/block.h"],
    "firmware/a/types.h": [],
    "firmware/a/user.h": ["firmware/a/types.h", "models/block/block.h"],
    "firmware/a/user.cpp": ["firmware/a/user.h"],
    "vp/main.cpp": ["firmware/a/user.h"],
}


def test_clean_tree_passes_and_levels_its_components(tmp_path):
    tree(tmp_path, CLEAN)
    r, stamp = run(tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = stamp.read_text().splitlines()
    assert lines[0] == "floors ok"
    assert set(lines[1:]) == {"1 platform/base/config", "2 models/block/block", "1 firmware/a/types",
                              "3 firmware/a/user", "4 vp/main"}


def test_cycle_and_floor_violation_are_one_line_each(tmp_path):
    files = dict(CLEAN)
    # A cycle of three components across two folders: a/x.h -> b/y.h, b/y.cpp -> b/z.h, b/z.h -> a/x.h;
    # a/user.cpp includes a/x.h but is above the cycle, not in it.
    files.update({
        "firmware/a/x.h": ["firmware/b/y.h"],
        "firmware/b/y.h": [],
        "firmware/b/y.cpp": ["firmware/b/y.h", "firmware/b/z.h"],
        "firmware/b/z.h": ["firmware/a/x.h"],
        "firmware/a/user.cpp": ["firmware/a/user.h", "firmware/a/x.h"],
        # A model including the firmware: the floor above it.
        "models/block/block.cpp": ["models/block/block.h", "firmware/a/types.h"],
    })
    tree(tmp_path, files)
    r, stamp = run(tmp_path)
    assert r.returncode == 1
    assert not stamp.exists()
    assert r.stderr.splitlines() == [
        "models/block/block.cpp:2: floor 'models' includes \"firmware/a/types.h\" of the floor above it, "
        "'firmware' (a floor uses only the floors below it)",
        "include cycle: firmware/a/x -> firmware/b/y -> firmware/b/z -> firmware/a/x",
    ]


def test_two_cycles_in_one_knot_and_levels_above_a_cycle(tmp_path):
    tree(tmp_path, {
        "firmware/k/a.h": ["firmware/k/b.h"],
        "firmware/k/b.h": ["firmware/k/a.h", "firmware/k/c.h"],
        "firmware/k/c.cpp": ["firmware/k/c.h", "firmware/k/a.h"],
        "firmware/k/c.h": [],
        "firmware/k/top.cpp": ["firmware/k/a.h"],
        "firmware/k/leaf.h": [],
    })
    check = load()
    bad, level = check.check(str(tmp_path))
    assert bad == [
        "include cycle: firmware/k/a -> firmware/k/b -> firmware/k/a",
        "include cycle: firmware/k/a -> firmware/k/b -> firmware/k/c -> firmware/k/a",
    ]
    assert level["firmware/k/leaf"] == 1
    assert level["firmware/k/a"] is None and level["firmware/k/c"] is None
    assert level["firmware/k/top"] is None  # above a cycle: no level either


def test_the_source_tree_passes(tmp_path):
    check = load()
    bad, level = check.check(SRC)
    assert bad == []
    assert all(v is not None for v in level.values())
