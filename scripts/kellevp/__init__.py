"""The scripts' shared code: the strict reader of study files (study_file), the design-space
search (explore) with its space file and expressions (space) and its fronts (pareto), and what a
command prints on bad input (InputError).

A command in scripts/ that uses it puts scripts/ on sys.path and imports from here (scripts/explore
is a launcher of explore.main); tests/scripts/ holds the package's tests (pytest, run by the test
suite: ctest -R scripts.pytest).
"""


class InputError(Exception):
    """Bad input: `where` is FILE:LINE (or FILE, or an option such as --seed), `message` names the
    key path and what was expected. The command prints `PROG: error: WHERE: MESSAGE` in one line
    and exits with status 2."""

    def __init__(self, where, message):
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message

    def line(self, prog):
        return f"{prog}: error: {self.where}: {self.message}"
