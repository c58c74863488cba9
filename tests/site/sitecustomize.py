"""On PYTHONPATH for every process the tests start (conftest.pytest_sessionstart): stock
`nbgrader` (as a command, `python -m nbgrader`), `jupyter lab`, kernels. It does one thing, what
`autograder`'s own commands do at start (autograder.cli._fast_start): it keeps jsonschema from
importing ``rfc3987_syntax``, a JupyterLab dependency that builds a grammar at import for the
"iri" string format no notebook schema uses (jsonschema then leaves that format unchecked, its
documented behaviour without the package). Measured 2026-11-29 on the 2-core machine, loaded:
``import nbgrader.apps.nbgraderapp`` 2.9-3.2 CPU-s with the import, 1.4 without; the suite starts
stock nbgrader dozens of times. The sandbox's processes run ``python -s -E`` and never see this.
"""

import sys

sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]
