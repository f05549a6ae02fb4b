"""What every command of scripts/ does the same way: bad input in one line with exit status 2
(`PROG: error: WHERE: MESSAGE`), the simulator named by one option (`--kelle-vp`, default
build/kelle-vp) and its command line built by one function (run_argv), the text of a value on
that command line, files written whole or not at all."""
import argparse
import csv
import json
import os
import subprocess
import sys

from . import ROOT, InputError

DEFAULT_KELLE_VP = os.path.join(ROOT, "build", "kelle-vp")


def fail(where, message=None):
    """Bad input: fail(where, message), or fail(message) when no file, line or option names it."""
    if message is None:
        raise InputError(None, where)
    raise InputError(where, message)


class Parser(argparse.ArgumentParser):
    """argparse, but a bad option is one line (no usage block) and exit status 2."""

    def error(self, message):
        raise InputError(None, f"{message} (scripts/{self.prog} --help)")


def command(prog, body, argv=None):
    """Runs body(argv) as the command PROG: its return value (None: 0) is the exit status; an
    InputError is printed as one line and gives 2."""
    try:
        return body(argv) or 0
    except InputError as e:
        print(e.line(prog), file=sys.stderr)
        return 2


def entry(prog):
    """A command's main: @entry("sweep") on `def main(argv)` gives main(argv=None) that runs it as
    the command PROG (command())."""
    def wrap(body):
        def main(argv=None):
            return command(prog, body, argv)
        main.__doc__ = body.__doc__
        return main
    return wrap


def parser(prog, doc):
    """The command's argument parser: its module's docstring as the help, one-line errors."""
    return Parser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_kelle_vp(ap):
    ap.add_argument("--kelle-vp", default=DEFAULT_KELLE_VP, metavar="PATH",
                    help="the simulator (default build/kelle-vp)")


def kelle_vp(path):
    """The simulator's absolute path, or an InputError naming --kelle-vp."""
    path = os.path.abspath(path)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        fail("--kelle-vp", f"{path} is not an executable (build first: ./scripts/build)")
    return path


def value_text(v):
    """A value as kelle-vp's -p takes it (and as a study's point folder names it)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def overrides_argv(overrides):
    """-p KEY=VALUE arguments: overrides a map, (key, value) pairs or KEY=VALUE texts."""
    items = overrides.items() if isinstance(overrides, dict) else overrides
    out = []
    for o in items:
        out += ["-p", o if isinstance(o, str) else f"{o[0]}={value_text(o[1])}"]
    return out


def run_argv(vp, scenario, out=None, overrides=(), verb="run", quiet=False, overlays=()):
    """kelle-vp VERB SCENARIO [-o OUT --force] [-q] [--overlay FILE ...] -p ...: the one way the
    scripts run it."""
    cmd = [vp, verb, scenario]
    if out is not None:
        cmd += ["-o", out, "--force"]
    if quiet:
        cmd += ["-q"]
    return cmd + overlay_argv(overlays) + overrides_argv(overrides)


def overlay_argv(overlays):
    """--overlay FILE arguments (kelle-vp merges each file over the scenario before the -p's)."""
    out = []
    for f in overlays:
        out += ["--overlay", f]
    return out


def add_overlay(ap):
    ap.add_argument("--overlay", action="append", default=[], metavar="FILE",
                    help="a YAML file of keys merged over every run's scenario, its system and technology "
                         "(kelle-vp --overlay; e.g. scenarios/tech/paper-implied.yaml); repeatable")


def overlay_files(paths):
    """The --overlay files as absolute paths, or an InputError naming the one that cannot be read."""
    out = []
    for p in paths:
        if not os.path.isfile(p):
            fail(f"--overlay {p}", "no such file (expected a YAML file of scenario keys)")
        out.append(os.path.abspath(p))
    return out


def checked_run(cmd, out):
    """Runs a kelle-vp command line that writes OUT/results.json; its results, or an InputError
    with the run's last line."""
    res, why = execute(cmd, out)
    if res is None:
        fail(f"kelle-vp {cmd[1]} {os.path.relpath(cmd[2], ROOT)}", why)
    return res


def execute(cmd, out):
    """Runs a kelle-vp command line that writes OUT/results.json: (results or None, the last line
    the run printed)."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        last = [l.strip() for l in r.stdout.splitlines() if l.strip()]
        return None, last[-1] if last else f"exit status {r.returncode}"
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f), None


def flat(node, prefix=""):
    """A results tree's numbers by dotted key path ({"a": {"b": 1}} -> {"a.b": 1}); booleans and
    text left out."""
    out = {}
    if isinstance(node, dict):
        for k, v in node.items():
            out.update(flat(v, f"{prefix}.{k}" if prefix else k))
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        out[prefix] = node
    return out


def write_atomic(path, write):
    """Writes a file under a temporary name beside it, renamed when complete: a failed write, close
    or rename (a full disk) is an InputError with the path and the system's reason, and leaves the
    old file or nothing."""
    tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", newline="") as f:
            write(f)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fail(path, f"cannot write the file ({e.strerror or e})")


def write_csv(path, rows):
    """rows (dicts) as a CSV file, the columns in order of first appearance, written whole."""
    cols = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)

    def table(f):
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)

    write_atomic(path, table)


def output_folder(name, docs=False, out=None):
    """Where a study script writes its tables and plots: --out, else docs/figures with --docs (the
    figures the docs quote, refreshed on purpose), else results/NAME/ (never the docs' own)."""
    if out:
        return os.path.abspath(out)
    if docs:
        return os.path.join(ROOT, "docs", "figures")
    return os.path.join(ROOT, "results", name)
