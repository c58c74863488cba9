"""``autograder serve``: grade every ``nbgrader submit`` as it arrives; feedback seconds later.

    autograder serve [--course DIR] [--out DIR] [--jobs N] [--poll S] [--port P]
                     [--exchange ROOT] [--scheduler ADDRESS] [grade's limits]

Watches ``EXCHANGE/COURSE_ID/inbound`` (polling: inotify does not fire on network file
systems), grades each new submission in warm sandboxes as ``autograder grade`` does, records
the scores in the gradebook (formgrader, manual grading, ``nbgrader export``), and releases a
feedback page where the student's ``nbgrader fetch_feedback`` (JupyterLab's Fetch Feedback)
finds it. Policy (what hidden tests show before the deadline, cooldown, attempt limit):
``AutograderServe.*`` in nbgrader_config.py (:mod:`.policy`). State in OUT (default
COURSE/serve): ``ledger.sqlite`` (restart, also after kill -9: nothing lost, nothing twice),
``attempts.csv``, ``grades.csv``, ``feedback/``, ``logs/``. Runs until SIGTERM or Ctrl-C.
Needs user namespaces for bubblewrap: run it on the hub's host or a VM, not in an
unprivileged container.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

# grade's options that mean nothing here
_NOT_HERE = {"submissions", "out", "assignment", "no_gradebook", "quiet", "help"}


def add_parser(subparsers):
    from autograder.grading import command as grade_command

    scratch = argparse.ArgumentParser(add_help=False).add_subparsers()
    grade = grade_command.add_parser(scratch)
    p = subparsers.add_parser(
        "serve",
        help="grade each `nbgrader submit` as it arrives and release feedback for Fetch Feedback",
        description=__doc__.split("\n\n", 1)[0] + "\n\n" + __doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for action in grade._actions:  # the same limits, sandbox and course options as `grade`
        if action.dest not in _NOT_HERE:
            p._add_action(action)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the service's folder: ledger, attempts.csv, grades.csv, logs (default COURSE/serve)",
    )
    p.add_argument(
        "--poll", type=float, default=0.5, help="seconds between looks at the inbound folder"
    )
    p.add_argument(
        "--exchange",
        type=Path,
        default=None,
        help="nbgrader's exchange root (default: Exchange.root of nbgrader_config.py)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help="port of the status endpoint (default: JUPYTERHUB_SERVICE_URL's as a hub service, else none)",
    )
    p.set_defaults(func=run, submissions=None, assignment=None, no_gradebook=False, quiet=True)
    return p


def run(args) -> int:
    import os
    from urllib.parse import urlparse

    from autograder.grading.host.sandbox import SandboxError, WorkerFailure
    from autograder.grading.serve.service import Service, log

    course = (args.course or Path.cwd()).resolve()
    args.out = (args.out or course / "serve").resolve()
    service = Service(args)
    try:
        service.setup()
    except (SandboxError, FileNotFoundError, ValueError, WorkerFailure) as exc:
        print(f"autograder serve: {exc}", file=sys.stderr)
        return 2
    import tornado.ioloop

    loop = tornado.ioloop.IOLoop.current()
    port, address = args.port, "127.0.0.1"
    url = os.environ.get("JUPYTERHUB_SERVICE_URL")
    if port is None and url:
        parsed = urlparse(url)
        port, address = parsed.port, parsed.hostname or "127.0.0.1"
    if port is not None:
        from autograder.grading.serve.web import make_app

        make_app(service).listen(port, address)
        log(
            f"status endpoint on http://{address}:{port}{os.environ.get('JUPYTERHUB_SERVICE_PREFIX', '/')}api/queue"
        )

    def stop(*_):
        service.stop()
        loop.add_callback(loop.stop)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    thread = service.start()

    def watch():
        if not thread.is_alive():
            loop.stop()

    tornado.ioloop.PeriodicCallback(watch, 500).start()
    loop.start()
    service.stop()
    thread.join(timeout=60)
    return 0
