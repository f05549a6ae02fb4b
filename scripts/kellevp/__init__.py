"""The scripts' shared code: every command of scripts/ is a module here (scripts/NAME is a launcher
of kellevp/NAME.py's main()), and what they share is written once: the strict study-file reader
(study_file), a study's points and results (sweep), the command line (cli: one-line errors, the
simulator's option and runs), means (stats), the design-space search (explore, space, pareto).

tests/scripts/ holds the package's tests (pytest, run by the test suite: ctest -R scripts.pytest).
"""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the source tree


class InputError(Exception):
    """Bad input: `where` is FILE:LINE (or FILE, or an option such as --seed; None when nothing
    names it), `message` names the key path and what was expected. The command prints
    `PROG: error: WHERE: MESSAGE` in one line and exits with status 2."""

    def __init__(self, where, message):
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message

    def line(self, prog):
        """The error as one line: control characters in it (a key with a line break) escaped."""
        return re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group(0))[1:-1], f"{prog}: error: {self}")
