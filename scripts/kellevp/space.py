"""The design-space search's space file (scripts/explore, docs/explore.md), read as strictly as a
scenario: every error is an InputError naming the file and line, the key path and what was
expected. What it reads:

  load_space(path) -> Space      the parsed, checked space (parameters, derived expressions,
                                 workloads, objectives, constraints, search settings, references)
  Space.design(values)           a design's overrides: its parameters, then the derived ones
  Space.grid_size(), grid_values()  the finite space's size (without building it) and its designs
  Param.neighbours(v)            the values one step from v
  design_id(design)              a design's name in the results
  Expr                           a derived expression: parsed once, evaluated with bounds
  identity(space) / continuable(space)  what a results folder must match to be resumed

Nothing here runs the simulator: the checks that need it (keys the platform knows, a base that is
an LLM scenario) are scripts/explore's, through `kelle-vp check`.
"""
import ast
import decimal
import difflib
import hashlib
import itertools
import json
import math
import operator
import os
import re

from . import InputError, study_file
from .cli import value_text

SPACE_KEYS = {"name", "description", "base", "overrides", "parameters", "derived", "constraints", "workloads",
              "objectives", "search", "references"}
PARAM_KEYS = {"range", "step", "log", "choices"}
CONSTRAINT_KEYS = {"area_mm2_max", "dram_fit", "quality_loss_max", "quality_command"}
SEARCH_KEYS = {"sampler", "trials", "population", "seed", "batch", "margin", "rounds", "max_simulated"}
REFERENCE_KEYS = {"label", "overrides"}
# Objectives, each minimised: what it is and how it aggregates over the workloads.
OBJECTIVES = {
    "latency": "latency of a run (prefill + decode), s: weighted geometric mean over the workloads",
    "energy_per_token": "energy per generated token, J: weighted geometric mean over the workloads",
    "area": "on-chip area, mm2 (the platform's area figures)",
    "quality_loss": "quality loss from the quality hook (constraints.quality_command)",
}
SAMPLERS = ["nsga2", "tpe", "random", "qmc", "grid"]
# The paper's designs, marked on every plot: the systems as built in (scenarios/systems/).
DEFAULT_REFERENCES = [{"label": "Kelle+eDRAM (paper)", "overrides": {"system": "kelle_edram"}},
                      {"label": "Original+SRAM (paper)", "overrides": {"system": "original_sram"}}]

# Bounds that keep a search within what a user can mean and what the samplers take.
MAX_WHOLE = 2 ** 53           # whole numbers: exact as floats (Optuna and NumPy compute in doubles)
MAX_MAGNITUDE = 1e18          # any number's magnitude (a range's width stays finite)
MAX_STEPS = 1e12             # a stepped range's values (more is a continuous range in all but name)
MAX_GRID_DESIGNS = 100_000    # the grid sampler's and --write-grid-study's designs (x workloads for the latter)
MAX_TRIALS = 1_000_000        # screened trials (about 1 ms each per workload)
MAX_POPULATION = 100_000
MAX_SIMULATED = 10_000
MAX_ROUNDS = 100
MAX_MARGIN = 10.0             # 1000 %: beyond it every design is a candidate
SEED_LIMIT = 2 ** 32          # NumPy's seeds: 0 to 2^32 - 1 (every sampler seeds a NumPy generator)
WORKER_SEED_STRIDE = 1000     # worker i draws with seed + 1000 i
MAX_WORKERS = 1024
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")


def design_text(v):
    """A design's value as text on kelle-vp's command line (cli.value_text), a whole-valued real as
    a whole number (8.0: '8'): a design sampled as a real and one given as a whole number are the
    same point."""
    if isinstance(v, float) and math.isfinite(v) and v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return value_text(v)


def design_id(design):
    """A design's name in the results: a hash of its overrides' texts."""
    text = json.dumps({k: design_text(v) for k, v in sorted(design.items())}, sort_keys=True)
    return "d" + hashlib.sha1(text.encode()).hexdigest()[:10]


def as_value(p, v):
    """A design's value of parameter p as the sampler gives it (from the text a trial records)."""
    if p.kind == "choice":
        i = p.index(v)
        return p.choices[i] if i is not None else v
    if isinstance(v, str):
        try:
            return int(v) if p.kind == "int" else float(v)
        except ValueError:
            return v
    return v


def number(v):
    """A finite int or float (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def whole(v):
    return isinstance(v, int) and not isinstance(v, bool)


def near(word, choices):
    m = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f"; did you mean '{m[0]}'?" if m else ""


class Lines:
    """Where each key path of a YAML file is (FILE:LINE in errors)."""

    def __init__(self, path, node):
        self.path = path
        self.at = {}
        self._walk(node, ())

    def _walk(self, n, prefix):
        import yaml
        stack = [(n, prefix)]
        seen = set()
        while stack:
            n, prefix = stack.pop()
            if id(n) in seen:  # an alias: walked once
                continue
            seen.add(id(n))
            if isinstance(n, yaml.MappingNode):
                for k, v in n.value:
                    if isinstance(k, yaml.ScalarNode):
                        p = prefix + (k.value,)
                        self.at.setdefault(p, k.start_mark.line + 1)
                        stack.append((v, p))
            elif isinstance(n, yaml.SequenceNode):
                for i, e in enumerate(n.value):
                    p = prefix + (i,)
                    self.at.setdefault(p, e.start_mark.line + 1)
                    stack.append((e, p))

    def where(self, *path):
        for i in range(len(path), 0, -1):
            if path[:i] in self.at:
                return f"{self.path}:{self.at[path[:i]]}"
        return self.path


# ------------------------------------------------------------------------------------ parameters

class Param:
    """A parameter: a list of choices, or a range of whole numbers or reals, with an optional step
    (a grid) or a log scale."""

    def __init__(self, key, kind, low=None, high=None, step=None, log=False, choices=None):
        self.key, self.kind, self.low, self.high, self.step, self.log, self.choices = \
            key, kind, low, high, step, log, choices

    def count(self):
        """How many values (None: a continuous range)."""
        if self.kind == "choice":
            return len(self.choices)
        if self.kind == "int":
            return (self.high - self.low) // (self.step or 1) + 1
        if self.step:
            return int((decimal.Decimal(str(self.high)) - decimal.Decimal(str(self.low))) //
                       decimal.Decimal(str(self.step))) + 1
        return None

    def value(self, i):
        """The i-th value of a finite parameter (never outside the range)."""
        if self.kind == "choice":
            return self.choices[i]
        if self.kind == "int":
            return self.low + i * (self.step or 1)
        return float(decimal.Decimal(str(self.low)) + i * decimal.Decimal(str(self.step)))  # as Optuna's grid

    def values(self):
        """Every value (a finite parameter), lazily."""
        return (self.value(i) for i in range(self.count()))

    def index(self, v):
        """The index of value v, or None."""
        if self.kind == "choice":
            texts = [design_text(c) for c in self.choices]
            return texts.index(design_text(v)) if design_text(v) in texts else None
        if not number(v) or self.count() is None:
            return None
        i = int(round((v - self.low) / (self.step or 1)))
        return i if 0 <= i < self.count() and math.isclose(self.value(i), v, rel_tol=1e-9, abs_tol=1e-12) else None

    def neighbours(self, v):
        """The values one step from v: the next below and above in a range's steps or a list of
        numbers, every other value of a list with names."""
        i = self.index(v)
        if i is None:
            return []
        n = self.count()
        if self.kind == "choice" and not all(number(c) for c in self.choices):
            return [self.value(j) for j in range(n) if j != i]
        return [self.value(j) for j in (i - 1, i + 1) if 0 <= j < n]

    def suggest(self, trial):
        if self.kind == "choice":
            return trial.suggest_categorical(self.key, self.choices)
        if self.kind == "int":
            return trial.suggest_int(self.key, self.low, self.high, step=self.step or 1, log=self.log)
        return trial.suggest_float(self.key, self.low, self.high, step=self.step, log=self.log)

    def spec(self):
        """The parameter as data (the results folder's record of the space)."""
        if self.kind == "choice":
            return {"choices": [design_text(c) for c in self.choices]}
        return {"range": [self.low, self.high], "step": self.step, "log": self.log, "kind": self.kind}


def check_number(v, where, kp, what="a number"):
    """A finite number of sensible magnitude (YAML's .inf and .nan are refused)."""
    if isinstance(v, float) and not math.isfinite(v):
        raise InputError(where, f"{kp}: expected {what}, got {v!r} (not a finite number)")
    if not number(v):
        raise InputError(where, f"{kp}: expected {what}, got {v!r}")
    if whole(v) and abs(v) > MAX_WHOLE:
        raise InputError(where, f"{kp}: expected {what} of at most 2^53 in magnitude, got {v}")
    if abs(v) > MAX_MAGNITUDE:
        raise InputError(where, f"{kp}: expected {what} of at most 1e18 in magnitude, got {v!r}")
    return v


def parse_param(lines, key, spec):
    where = lines.where("parameters", key)
    kp = f"parameters.{key}"
    if not isinstance(spec, dict):
        raise InputError(where, f"{kp}: expected a map with 'range: [low, high]' (and 'step', 'log') or 'choices: [...]'")
    unknown_keys(lines, spec, ("parameters", key), kp, PARAM_KEYS)
    if ("range" in spec) == ("choices" in spec):
        raise InputError(where, f"{kp}: expected exactly one of 'range: [low, high]' or 'choices: [...]'")
    if "choices" in spec:
        ch = spec["choices"]
        cw = lines.where("parameters", key, "choices")
        if not isinstance(ch, list) or not ch:
            raise InputError(cw, f"{kp}.choices: expected a non-empty list of values")
        for i, c in enumerate(ch):
            w = lines.where("parameters", key, "choices", i)
            if isinstance(c, (list, dict)) or c is None:
                raise InputError(w, f"{kp}.choices[{i}]: expected a number, a name or a boolean, got {c!r}")
            if isinstance(c, str):
                if not c.strip() or "\n" in c:
                    raise InputError(w, f"{kp}.choices[{i}]: expected a name (one line of text), got {c!r}")
            elif not isinstance(c, bool):
                check_number(c, w, f"{kp}.choices[{i}]")
        if len(set(map(design_text, ch))) != len(ch):
            raise InputError(cw, f"{kp}.choices: a value is given twice")
        for k in ("step", "log"):
            if k in spec:
                raise InputError(lines.where("parameters", key, k), f"{kp}.{k}: only with 'range'")
        return Param(key, "choice", choices=list(ch))
    r = spec["range"]
    rw = lines.where("parameters", key, "range")
    if not isinstance(r, list) or len(r) != 2:
        raise InputError(rw, f"{kp}.range: expected [low, high], two numbers, got {r!r}")
    for i, x in enumerate(r):
        check_number(x, rw, f"{kp}.range[{i}]")
    low, high = r
    if low >= high:
        raise InputError(rw, f"{kp}.range: expected low < high, got [{low}, {high}]")
    step = spec.get("step")
    log = spec.get("log", False)
    sw = lines.where("parameters", key, "step")
    if not isinstance(log, bool):
        raise InputError(lines.where("parameters", key, "log"), f"{kp}.log: expected true or false, got {log!r}")
    if step is not None:
        check_number(step, sw, f"{kp}.step", "a number > 0")
        if step <= 0:
            raise InputError(sw, f"{kp}.step: expected a number > 0, got {step!r}")
    if log and (low <= 0 or step is not None):
        raise InputError(lines.where("parameters", key, "log"), f"{kp}.log: needs low > 0 and no step")
    is_int = whole(low) and whole(high) and (step is None or whole(step))
    if step is not None and (high - low) / step > MAX_STEPS:
        raise InputError(sw, f"{kp}.step: {step} makes {(high - low) / step:.3g} values of [{low}, {high}], at most "
                             f"{MAX_STEPS:.0e}: give a coarser step, or none (a continuous range)")
    if step is not None:
        # In decimal, as the numbers are written (and as Optuna checks them): 0.1 divides 0.3.
        width, dstep = decimal.Decimal(str(high)) - decimal.Decimal(str(low)), decimal.Decimal(str(step))
        if width % dstep != 0:
            q = width / dstep
            last = decimal.Decimal(str(low)) + (width // dstep) * dstep
            raise InputError(sw, f"{kp}.step: {step} does not divide the range [{low}, {high}] (width / step = "
                                 f"{float(q):.6g}): its last value would be {float(last):.12g}, not {high}; give a "
                                 "high that is low + a whole number of steps, or a step that divides the width")
    if is_int:
        return Param(key, "int", low, high, step, log)
    return Param(key, "float", float(low), float(high), float(step) if step is not None else None, log)


# ---------------------------------------------------------------------------- derived expressions

REF = re.compile(r"\$\{([^}]*)\}")
FUNCS = {"min": min, "max": max, "round": round, "int": int, "float": float, "abs": abs}
BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
OPTEXT = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
MAX_EXPR_CHARS = 1000
MAX_EXPR_NODES = 200
ALLOWED = "numbers, ${key} references, + - * / // % ** and " + ", ".join(FUNCS)


class Expr:
    """A derived parameter's expression: arithmetic on ${parameter} references (numbers, + - * /
    // % **, min, max, round, int, float, abs), or one reference alone, which may name a choice.
    Parsed once; evaluated by walking the tree with bounds (no eval): every intermediate value a
    finite number of at most 1e18 in magnitude (whole numbers at most 2^53), a power whose result
    would exceed that refused before it is computed, a name in arithmetic refused."""

    def __init__(self, text, known, where, kp):
        self.text, self.where, self.kp = text, where, kp
        shown = text if not isinstance(text, str) or len(text) <= 60 else text[:40] + " ... " + text[-15:]
        self.shown = shown
        if not isinstance(text, str) or not text.strip():
            raise InputError(where, f"{kp}: expected an expression such as '${{system.compute.rsa.rows}}' or "
                                    f"'2 * ${{key}}', got {text!r}")
        if len(text) > MAX_EXPR_CHARS:
            raise InputError(where, f"{kp}: the expression has {len(text)} characters, at most {MAX_EXPR_CHARS}")
        self.refs = []
        for ref in REF.findall(text):
            if ref not in known:
                raise InputError(where, f"{kp}: '${{{ref}}}' is not a parameter" + near(ref, known) +
                                 f" (parameters: {', '.join(sorted(known))})")
            if ref not in self.refs:
                self.refs.append(ref)
        m = REF.fullmatch(text.strip())
        self.alone = m.group(1) if m else None
        if self.alone:
            return
        src = REF.sub(lambda mo: f"_v{self.refs.index(mo.group(1))}", text)
        if "$" in src:
            raise InputError(where, f"{kp}: '{shown}': a reference is written ${{key}}")
        try:
            self.tree = ast.parse(src.strip(), mode="eval")
        except SyntaxError as e:
            raise InputError(where, f"{kp}: '{shown}': expected an arithmetic expression of ${{key}} references "
                                    f"({e.msg})")
        except (RecursionError, MemoryError, ValueError):
            raise InputError(where, f"{kp}: '{shown}': expected an arithmetic expression of ${{key}} references "
                                    "(nested too deep)")
        nodes = list(ast.walk(self.tree))
        if len(nodes) > MAX_EXPR_NODES:
            raise InputError(where, f"{kp}: '{shown}': {len(nodes)} terms, at most {MAX_EXPR_NODES}")
        for node in nodes:
            ok = isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Call,
                                   ast.operator, ast.UAdd, ast.USub))
            if isinstance(node, ast.BinOp) and type(node.op) not in BINOPS:
                ok = False
            if isinstance(node, ast.Constant):
                ok = number(node.value)
                if isinstance(node.value, float) and not math.isfinite(node.value):
                    raise InputError(where, f"{kp}: '{shown}': a number that is not finite ({node.value})")
            if isinstance(node, ast.Call):
                ok = isinstance(node.func, ast.Name) and node.func.id in FUNCS and not node.keywords \
                    and all(not isinstance(a, ast.Starred) for a in node.args) and node.args
            if isinstance(node, ast.Name) and not (re.fullmatch(r"_v[0-9]+", node.id) or node.id in FUNCS):
                ok = False
            if not ok:
                raise InputError(where, f"{kp}: '{shown}': only {ALLOWED} are allowed")

    def __call__(self, values):
        """The expression's value for a design's parameter values (InputError on a bad value)."""
        if self.alone:
            return values[self.alone]
        env = [values[r] for r in self.refs]
        try:
            v = self._eval(self.tree.body, env)
        except RecursionError:
            raise InputError(self.where, f"{self.kp}: '{self.shown}': nested too deep")
        return self._checked(v, values)

    def _fail(self, what, values):
        at = ", ".join(f"{r}={design_text(values[r])}" for r in self.refs)
        raise InputError(self.where, f"{self.kp}: '{self.shown}' {what}" + (f" (with {at})" if at else ""))

    def _checked(self, v, values):
        if isinstance(v, float) and not math.isfinite(v):
            self._fail(f"is not a finite number ({v})", values)
        if whole(v) and abs(v) > MAX_WHOLE or number(v) and abs(v) > MAX_MAGNITUDE:
            self._fail(f"is out of range ({v:.6g}; at most 1e18, whole numbers at most 2^53)", values)
        return v

    def _eval(self, n, env):
        values = {r: env[i] for i, r in enumerate(self.refs)}
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            v = env[int(n.id[2:])]
            if not number(v):
                self._fail(f"uses '${{{self.refs[int(n.id[2:])]}}}' in arithmetic, but its value is "
                           f"{'a boolean' if isinstance(v, bool) else 'a name'} ({design_text(v)!r}): arithmetic "
                           "needs numbers (a reference alone may name a choice)", values)
            return v
        if isinstance(n, ast.UnaryOp):
            v = self._eval(n.operand, env)
            return self._checked(-v if isinstance(n.op, ast.USub) else +v, values)
        if isinstance(n, ast.Call):
            args = [self._eval(a, env) for a in n.args]
            f = n.func.id
            if f in ("int", "float", "abs", "round") and len(args) != 1 and not (f == "round" and len(args) == 2):
                self._fail(f"calls {f}() with {len(args)} arguments", values)
            if f == "round" and len(args) == 2 and (not whole(args[1]) or abs(args[1]) > 30):
                self._fail("rounds to a number of digits that is not a whole number from -30 to 30", values)
            return self._checked(FUNCS[f](*args), values)
        a = self._eval(n.left, env)
        b = self._eval(n.right, env)
        op = type(n.op)
        if op in (ast.Div, ast.FloorDiv, ast.Mod) and b == 0:
            self._fail(f"divides by zero ({design_text(a)} {OPTEXT[op]} 0)", values)
        if op is ast.Pow:
            if a == 0 and b < 0:
                self._fail(f"divides by zero (0 ** {design_text(b)})", values)
            if a < 0 and not whole(b) and b != int(b):
                self._fail(f"raises a negative number to a fractional power ({design_text(a)} ** {b})", values)
            if abs(a) > 1 and b * math.log10(abs(a)) > 18.5:
                self._fail(f"is out of range ({design_text(a)} ** {design_text(b)} exceeds 1e18)", values)
        try:
            v = BINOPS[op](a, b)
        except (OverflowError, ZeroDivisionError, ValueError) as e:
            self._fail(f"cannot be evaluated ({e})", values)
        return self._checked(v, values)


# ------------------------------------------------------------------------------------------ space

class Space:
    """A parsed space file. Fields: path, lines, name, description, base, base_sha, overrides,
    params, derived ({key: Expr}), workloads ([{label, overrides, weight}]), objectives, area_max,
    dram_fit, quality_max, quality_cmd, sampler, trials, population, seed, batch, rounds,
    max_simulated, margin, references ([{label, overrides, where}])."""

    def design(self, values):
        """The scenario overrides of a design: its parameters and the derived ones, in the
        space's order."""
        d = {p.key: values[p.key] for p in self.params}
        for k, e in self.derived.items():
            d[k] = e(values)
        return d

    def grid_size(self):
        """The grid's designs (None: a parameter has no grid), without building it."""
        n = 1
        for p in self.params:
            c = p.count()
            if c is None:
                return None
            n *= c
        return n

    def grid_values(self):
        """Every design's parameter values, lazily, in order."""
        for combo in itertools.product(*(list(p.values()) for p in self.params)):
            yield dict(zip((p.key for p in self.params), combo))

    def check_grid(self, what, per_design=1):
        """The grid's size, or an InputError when it has no grid or more than the bound."""
        for p in self.params:
            if p.count() is None:
                raise InputError(self.lines.where("parameters", p.key),
                                 f"parameters.{p.key}: {what} needs choices or a range with a step")
        n = self.grid_size()
        if n * per_design > MAX_GRID_DESIGNS:
            sizes = " x ".join(str(p.count()) for p in self.params)
            raise InputError(self.lines.where("parameters"),
                             f"parameters: {what}: the grid has {n:,} designs ({sizes})" +
                             (f" x {per_design} workloads = {n * per_design:,} runs" if per_design > 1 else "") +
                             f", at most {MAX_GRID_DESIGNS:,}: give coarser steps or fewer choices" +
                             (", or a sampler other than grid" if what == "search.sampler grid" else ""))
        return n


def unknown_keys(lines, m, path, kp, keys):
    """An InputError for the first key of map m (at key path `path`) that is not one of `keys`."""
    for k in m:
        if k not in keys:
            raise InputError(lines.where(*path, k), f"{kp}.{k}: unknown key" + near(k, keys) +
                             f" (expected one of: {', '.join(sorted(keys))})")


def section(lines, s, key, keys):
    """The top-level map `key` of the space (empty when absent), its keys checked."""
    v = s.get(key) or {}
    if not isinstance(v, dict):
        raise InputError(lines.where(key), f"{key}: expected a map of {', '.join(sorted(keys))}")
    unknown_keys(lines, v, (key,), key, keys)
    return v


def check_key(k, where, kp):
    if not isinstance(k, str) or not KEY.fullmatch(k):
        raise InputError(where, f"{kp}: expected a scenario key path (letters, digits, '_', dots), got {k!r}")


def check_overrides(lines, ov, path, kp):
    if not isinstance(ov, dict):
        raise InputError(lines.where(*path), f"{kp}: expected a map of key.path: value, got {ov!r}")
    for k, v in ov.items():
        w = lines.where(*path, k)
        check_key(k, w, f"{kp}.{k}" if isinstance(k, str) else kp)
        check_value(v, w, f"{kp}.{k}")


def check_value(v, where, kp):
    """A value of an override: finite numbers everywhere, no null."""
    if v is None:
        raise InputError(where, f"{kp}: expected a value, got nothing (null)")
    if isinstance(v, float) and not math.isfinite(v):
        raise InputError(where, f"{kp}: expected a finite number, got {v!r}")
    if isinstance(v, dict):
        for k, x in v.items():
            check_value(x, where, f"{kp}.{k}")
    if isinstance(v, list):
        for i, x in enumerate(v):
            check_value(x, where, f"{kp}[{i}]")


def load_space(path):
    """Reads and checks a space file; InputError on the first problem."""
    import yaml
    try:
        s = study_file.load(path, yaml12_numbers=True)
    except study_file.StudyFileError as e:
        raise InputError(e.where, e.message)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        node = yaml.compose(text, Loader=study_file.Yaml12NumbersLoader)
    except (yaml.YAMLError, RecursionError):
        node = None
    lines = Lines(path, node)
    if not isinstance(s, dict):
        raise InputError(path, "expected a map with keys base, parameters, workloads, objectives")
    for k in s:
        if k not in SPACE_KEYS:
            raise InputError(lines.where(k), f"unknown key '{k}'" + near(k, SPACE_KEYS) +
                             f" (expected one of: {', '.join(sorted(SPACE_KEYS))})")
    for k in ("base", "parameters", "workloads", "objectives"):
        if k not in s:
            raise InputError(path, f"missing key '{k}'")
    sp = Space()
    sp.path = os.path.abspath(path)
    sp.lines = lines
    sp.name = s.get("name") or os.path.splitext(os.path.basename(path))[0]
    if not isinstance(sp.name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}", sp.name):
        raise InputError(lines.where("name"), f"name: expected a plain name (letters, digits, '_', '-', '.'; at "
                                              f"most 100), got {sp.name!r}")
    sp.description = s.get("description", "")
    if not isinstance(sp.description, str):
        raise InputError(lines.where("description"), f"description: expected text, got {sp.description!r}")
    # The base.
    bw = lines.where("base")
    if not isinstance(s["base"], str) or not s["base"]:
        raise InputError(bw, f"base: expected a scenario file name, got {s['base']!r}")
    sp.base_text = s["base"]  # as the file gives it (errors say it so)
    sp.base = os.path.normpath(os.path.join(os.path.dirname(sp.path), s["base"]))
    if not os.path.isfile(sp.base):
        raise InputError(bw, f"base: file '{s['base']}' not found (looked at {sp.base})")
    if os.path.realpath(sp.base) == os.path.realpath(sp.path):
        raise InputError(bw, "base: names this space file itself; expected a scenario file (scenarios/studies/llm.yaml, "
                             "say)")
    with open(sp.base, "rb") as f:
        sp.base_sha = hashlib.sha256(f.read()).hexdigest()
    sp.overrides = s.get("overrides") or {}
    check_overrides(lines, sp.overrides, ("overrides",), "overrides")
    # Parameters and derived ones.
    params = s["parameters"]
    if not isinstance(params, dict) or not params:
        raise InputError(lines.where("parameters"), "parameters: expected a map of key.path: {range: ...} or "
                                                    "{choices: ...}")
    for k in params:
        check_key(k, lines.where("parameters", k), f"parameters.{k}")
    sp.params = [parse_param(lines, k, v) for k, v in params.items()]
    known = [p.key for p in sp.params]
    derived = s.get("derived") or {}
    if not isinstance(derived, dict):
        raise InputError(lines.where("derived"), "derived: expected a map of key.path: expression")
    sp.derived = {}
    for k, e in derived.items():
        w, kp = lines.where("derived", k), f"derived.{k}"
        check_key(k, w, kp)
        if k in known:
            raise InputError(w, f"{kp}: is also a parameter")
        if k in sp.overrides:
            raise InputError(w, f"{kp}: is also in overrides")
        if number(e):  # a constant: an override, really, but harmless
            e = repr(e)
        sp.derived[k] = Expr(e, known, w, kp)
    for k in sp.overrides:
        if k in known:
            raise InputError(lines.where("overrides", k), f"overrides.{k}: is also a parameter")
    # Workloads.
    wl = s["workloads"]
    if not isinstance(wl, list) or not wl:
        raise InputError(lines.where("workloads"), "workloads: expected a non-empty list of maps (key.path: value, "
                                                   "and weight)")
    sp.workloads = []
    for i, w in enumerate(wl):
        wh = lines.where("workloads", i)
        if not isinstance(w, dict) or not w:
            raise InputError(wh, f"workloads[{i}]: expected a map of key.path: value (and weight)")
        w = dict(w)
        weight = w.pop("weight", 1)
        label = w.pop("label", None)
        check_number(weight, lines.where("workloads", i, "weight"), f"workloads[{i}].weight", "a number > 0")
        if weight <= 0:
            raise InputError(lines.where("workloads", i, "weight"), f"workloads[{i}].weight: expected a number > 0, "
                                                                    f"got {weight!r}")
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise InputError(lines.where("workloads", i, "label"), f"workloads[{i}].label: expected text, got {label!r}")
        check_overrides(lines, w, ("workloads", i), f"workloads[{i}]")
        for k in w:
            if k in known or k in sp.derived:
                raise InputError(lines.where("workloads", i, k), f"workloads[{i}].{k}: is a parameter of the space; "
                                 "a workload sets what the designs run, not the designs")
        label = label or "/".join(design_text(v) for v in w.values())
        sp.workloads.append({"label": str(label), "overrides": w, "weight": float(weight)})
    if len({w["label"] for w in sp.workloads}) != len(sp.workloads):
        raise InputError(lines.where("workloads"), "workloads: two workloads are the same (give them distinct keys "
                                                   "or labels)")
    # Objectives.
    obj = s["objectives"]
    if isinstance(obj, str):
        obj = [obj]
    if not isinstance(obj, list) or not obj:
        raise InputError(lines.where("objectives"), f"objectives: expected a list of: {', '.join(OBJECTIVES)}")
    for o in obj:
        if not isinstance(o, str) or o not in OBJECTIVES:
            raise InputError(lines.where("objectives"), f"objectives: unknown objective '{o}'" + near(o, OBJECTIVES) +
                             f" (expected: {', '.join(OBJECTIVES)})")
    if len(set(obj)) != len(obj):
        raise InputError(lines.where("objectives"), "objectives: an objective is given twice")
    sp.objectives = obj
    # Constraints.
    c = section(lines, s, "constraints", CONSTRAINT_KEYS)
    sp.area_max = c.get("area_mm2_max")
    if sp.area_max is not None:
        w = lines.where("constraints", "area_mm2_max")
        check_number(sp.area_max, w, "constraints.area_mm2_max", "a number > 0 (mm2)")
        if sp.area_max <= 0:
            raise InputError(w, f"constraints.area_mm2_max: expected a number > 0 (mm2), got {sp.area_max!r}")
    sp.dram_fit = c.get("dram_fit", True)
    if not isinstance(sp.dram_fit, bool):
        raise InputError(lines.where("constraints", "dram_fit"), f"constraints.dram_fit: expected true or false, got "
                                                                 f"{sp.dram_fit!r}")
    sp.quality_max = c.get("quality_loss_max")
    sp.quality_cmd = c.get("quality_command")
    if sp.quality_max is not None:
        w = lines.where("constraints", "quality_loss_max")
        check_number(sp.quality_max, w, "constraints.quality_loss_max", "a number >= 0")
        if sp.quality_max < 0:
            raise InputError(w, f"constraints.quality_loss_max: expected a number >= 0, got {sp.quality_max!r}")
    if (sp.quality_max is not None or "quality_loss" in obj) and not sp.quality_cmd:
        raise InputError(lines.where("constraints", "quality_command"), "constraints.quality_command: needed by "
                         "quality_loss_max or the quality_loss objective: a command that prints a design's quality "
                         "loss (it gets the design's overrides as JSON on stdin)")
    if sp.quality_cmd is not None and (not isinstance(sp.quality_cmd, str) or not sp.quality_cmd.strip()):
        raise InputError(lines.where("constraints", "quality_command"), f"constraints.quality_command: expected a "
                                                                        f"command line, got {sp.quality_cmd!r}")
    # Search settings.
    se = section(lines, s, "search", SEARCH_KEYS)
    sp.sampler = se.get("sampler", "nsga2")
    if sp.sampler not in SAMPLERS:
        raise InputError(lines.where("search", "sampler"), f"search.sampler: expected one of {', '.join(SAMPLERS)}, "
                                                           f"got {sp.sampler!r}" + near(sp.sampler, SAMPLERS))

    def setting(k, default, lo, hi):
        v = se.get(k, default)
        w = lines.where("search", k)
        if not whole(v) or not lo <= v <= hi:
            raise InputError(w, f"search.{k}: expected a whole number from {lo:,} to {hi:,}, got {v!r}")
        return v

    sp.trials = setting("trials", 200, 1, MAX_TRIALS)
    sp.population = setting("population", 40, 2, MAX_POPULATION)
    sp.seed = setting("seed", 1, 0, SEED_LIMIT - 1)
    sp.batch = setting("batch", sp.population, 1, MAX_POPULATION)
    sp.rounds = setting("rounds", 2, 1, MAX_ROUNDS)
    sp.max_simulated = setting("max_simulated", 24, 1, MAX_SIMULATED)
    sp.margin = se.get("margin", 0.1)
    mw = lines.where("search", "margin")
    check_number(sp.margin, mw, "search.margin", f"a number from 0 to {MAX_MARGIN:g} (0.1: within 10 % of the front)")
    if not 0 <= sp.margin <= MAX_MARGIN:
        raise InputError(mw, f"search.margin: expected a number from 0 to {MAX_MARGIN:g} (0.1: within 10 % of the "
                             f"front), got {sp.margin!r}")
    # References (the paper's designs).
    refs = s.get("references", DEFAULT_REFERENCES)
    if not isinstance(refs, list):
        raise InputError(lines.where("references"), "references: expected a list of {label: text, overrides: "
                                                    "{key.path: value}}")
    sp.references = []
    for j, r in enumerate(refs):
        rw = lines.where("references", j)
        if not isinstance(r, dict):
            raise InputError(rw, f"references[{j}]: expected a map {{label: text, overrides: {{key.path: value}}}}")
        unknown_keys(lines, r, ("references", j), f"references[{j}]", REFERENCE_KEYS)
        if not isinstance(r.get("label"), str) or not r["label"].strip():
            raise InputError(rw, f"references[{j}].label: expected text, got {r.get('label')!r}")
        ov = r.get("overrides", {}) or {}
        check_overrides(lines, ov, ("references", j, "overrides"), f"references[{j}].overrides")
        sp.references.append({"label": r["label"], "overrides": ov,
                              "where": rw if refs is not DEFAULT_REFERENCES else lines.where("base")})
    if len({r["label"] for r in sp.references}) != len(sp.references):
        raise InputError(lines.where("references"), "references: two references have the same label")
    if sp.sampler == "grid":
        sp.check_grid("search.sampler grid")
    for values in probe_designs(sp):  # a name in arithmetic, a division by zero at a parameter's end
        sp.design(values)
    return sp


def probe_designs(sp):
    """A few designs that reach each parameter's ends: every parameter at its low end, at its high
    end, and each choice with the others at their low end (the derived expressions are checked on
    them before any search)."""
    low = {p.key: p.value(0) if p.kind == "choice" else p.low for p in sp.params}
    high = {p.key: p.value(len(p.choices) - 1) if p.kind == "choice" else p.high for p in sp.params}
    out = [low, high]
    for p in sp.params:
        if p.kind == "choice":
            for c in p.choices[1:]:
                out.append({**low, p.key: c})
        else:
            out.append({**low, p.key: p.high})
    return out


# ------------------------------------------------------------------------------ the results folder

def identity(sp):
    """What a results folder's search must share with this one to be resumed: the space and the
    settings that decide which trials the study holds."""
    return {
        "name": sp.name,
        "base": sp.base,
        "base_sha256": sp.base_sha,
        "overrides": {k: design_text(v) for k, v in sp.overrides.items()},
        "parameters": {p.key: p.spec() for p in sp.params},
        "derived": {k: e.text for k, e in sp.derived.items()},
        "workloads": [{"label": w["label"], "weight": w["weight"],
                       "overrides": {k: design_text(v) for k, v in w["overrides"].items()}} for w in sp.workloads],
        "objectives": list(sp.objectives),
        "constraints": {"area_mm2_max": sp.area_max, "dram_fit": sp.dram_fit, "quality_loss_max": sp.quality_max,
                        "quality_command": sp.quality_cmd},
        "search": {"sampler": sp.sampler, "seed": sp.seed, "population": sp.population, "batch": sp.batch},
    }


def continuable(sp):
    """What a resumed search may change (it says so): more trials, the refinement's settings, the
    references, the description."""
    return {"trials": sp.trials, "margin": sp.margin, "rounds": sp.rounds, "max_simulated": sp.max_simulated,
            "references": [{"label": r["label"], "overrides": {k: design_text(v) for k, v in r["overrides"].items()}}
                           for r in sp.references],
            "description": sp.description}


def differences(old, new, prefix=""):
    """The key paths where two records differ, each with both values: [(path, old, new)]."""
    out = []
    if isinstance(old, dict) and isinstance(new, dict):
        for k in list(old) + [k for k in new if k not in old]:
            p = f"{prefix}.{k}" if prefix else str(k)
            if k not in old:
                out.append((p, "(none)", new[k]))
            elif k not in new:
                out.append((p, old[k], "(none)"))
            else:
                out += differences(old[k], new[k], p)
    elif old != new:
        out.append((prefix, old, new))
    return out
