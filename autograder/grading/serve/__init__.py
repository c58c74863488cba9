"""``autograder serve``: grading as each ``nbgrader submit`` arrives (a long-lived service).

* :mod:`.exchange` - nbgrader's exchange: intake from ``inbound/`` (the refusals of ``autograder
  collect``), release into ``feedback/`` where ``nbgrader fetch_feedback`` looks;
* :mod:`.ledger`   - SQLite: every submission's state and times (nothing lost, nothing twice);
* :mod:`.policy`   - what hidden tests show before the deadline, cooldown, attempt limit;
* :mod:`.page`     - the student's feedback page (never built from a test cell);
* :mod:`.pool`     - warm sandboxes for the service's life (local, or Dask);
* :mod:`.service`  - the loop: poll, grade, record, release; its parts :mod:`.inbound` (intake),
  :mod:`.calibration`, :mod:`.record` (scores written), :mod:`.views` (the student's page,
  ``api/me``), :mod:`.outputs` (what the instructor reads in ``OUT``);
* :mod:`.web`      - the status endpoint (tornado, a JupyterHub service behind hub OAuth);
* :mod:`.command`  - the command line; ``make bench-serve`` is :mod:`autograder.authoring.serve_bench`.
"""
