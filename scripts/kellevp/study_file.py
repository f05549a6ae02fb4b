"""Reads a study file (scenarios/studies/*.yaml, docs/studies.md) as strictly as kelle-vp reads a
scenario: one YAML document; a key given twice in one map is an error naming the file and line
(PyYAML would keep the second silently); a YAML syntax error says what was expected where.

  load(path) -> the document (dict, list, ...), or raises StudyFileError(where, message), where
  `where` is "FILE:LINE" (or FILE) and the message names the key path when there is one.
  load(path, yaml12_numbers=True) also reads the exponent forms YAML 1.1 takes for text (`1e3`,
  `2E-4`: numbers in YAML 1.2, in yaml-cpp and so in kelle-vp's scenarios) as numbers.

Used by scripts/sweep and every other script that reads a study file (scripts/what-if-main,
scripts/edge-study, the space files of scripts/explore).
"""
import re

import yaml


class Yaml12NumbersLoader(yaml.SafeLoader):
    """PyYAML's safe loader (YAML 1.1), but `1e3` and `-2E-4` are numbers as in YAML 1.2."""


Yaml12NumbersLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


class StudyFileError(Exception):
    def __init__(self, where, message):
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


def _syntax_error(path, e, what="YAML syntax error"):
    """'FILE:LINE', 'YAML syntax error: what was expected (while ... at line N)'."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f"{path}:{mark.line + 1}" if mark is not None else path
    problem = " ".join(str(getattr(e, "problem", None) or e).split())
    context = getattr(e, "context", None)
    cmark = getattr(e, "context_mark", None)
    if context and cmark is not None and cmark is not mark:
        problem += f" ({' '.join(context.split())} at line {cmark.line + 1})"
    return StudyFileError(where, f"{what}: {problem}")


def _check_keys(path, node):
    """Duplicate keys in every map of the composed tree (each node once: aliases are not expanded,
    so an alias bomb or an alias inside its own anchor costs nothing)."""
    seen_nodes = set()
    stack = [(node, "")]
    while stack:
        n, at = stack.pop()
        if id(n) in seen_nodes:
            continue
        seen_nodes.add(id(n))
        if isinstance(n, yaml.SequenceNode):
            for i, e in enumerate(n.value):
                stack.append((e, f"{at}[{i}]"))
        elif isinstance(n, yaml.MappingNode):
            first = {}
            for k, v in n.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    key = k.value
                    line = k.start_mark.line + 1
                    p = f"{at}.{key}" if at else key
                    if key in first:
                        raise StudyFileError(f"{path}:{line}",
                                             f"{p}: duplicate key (first given at line {first[key]})")
                    first[key] = line
                    stack.append((v, p))
                else:
                    stack.append((v, at))


def load(path, yaml12_numbers=False):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except IsADirectoryError:
        raise StudyFileError(path, "is a folder, expected a study file (YAML)")
    except (OSError, UnicodeDecodeError) as e:
        raise StudyFileError(path, f"cannot read the file ({getattr(e, 'strerror', None) or e})")
    loader = Yaml12NumbersLoader if yaml12_numbers else yaml.SafeLoader
    try:
        node = yaml.compose(text, Loader=loader)  # one document: a second is an error
    except yaml.YAMLError as e:
        raise _syntax_error(path, e)
    except RecursionError:
        raise StudyFileError(path, "YAML syntax error: lists and maps nested too deep (a study file nests a few levels)")
    if node is None:
        return None
    _check_keys(path, node)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:  # what only the construction finds (an unhashable key, say)
        raise _syntax_error(path, e, "YAML error")
