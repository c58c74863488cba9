"""On PYTHONPATH only while tests/stock_memo.py records a stock nbgrader run: each Python process
(nbgrader, and each kernel it starts) appends the name of every autograder module it starts to
import, as it does, to $AUTOGRADER_STOCK_RECORD/<pid>.txt (first line: its command line), so a
kernel that dies mid-notebook has still recorded what it loaded. It changes nothing else: the
finder records the name and finds nothing, and Python's own finders import the module."""

import os
import sys

_FOLDER = os.environ.get("AUTOGRADER_STOCK_RECORD")


class _Recorder:
    def __init__(self, path):
        self.path = path
        self.seen = set()

    def find_spec(self, name, path=None, target=None):
        if (name == "autograder" or name.startswith("autograder.")) and name not in self.seen:
            self.seen.add(name)
            with open(self.path, "a") as fh:
                fh.write(name + "\n")
        return None


if _FOLDER:
    _path = os.path.join(_FOLDER, f"{os.getpid()}.txt")
    with open(_path, "a") as _fh:
        _fh.write(" ".join(sys.orig_argv).replace("\n", " ") + "\n")
    sys.meta_path.insert(0, _Recorder(_path))
