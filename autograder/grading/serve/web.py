"""The status endpoint: tornado, as a JupyterHub hub-managed service behind the hub's OAuth.

Registered in ``jupyterhub_config.py`` (see docs/instructor.md)::

    c.JupyterHub.services = [{"name": "autograder", "url": "http://127.0.0.1:10101",
                              "command": ["autograder", "serve", "--course", COURSE, "--port", "10101"],
                              "oauth_no_confirm": True}]
    c.JupyterHub.load_roles = [{"name": "user", "scopes": ["self", "access:services!service=autograder"]}]

* ``GET PREFIX/api/queue``: ``{"queued", "grading", "released", "ready"}`` (any hub user);
* ``GET PREFIX/api/me``: the logged-in student's last result per assignment, as the policy lets
  them see it (:meth:`.service.Service.student_status`), and their submissions still waiting.

Started by the hub, the service finds ``JUPYTERHUB_API_TOKEN`` and ``JUPYTERHUB_SERVICE_PREFIX``
in its environment and every request must come from a logged-in hub user. Without a hub (no
token), ``api/queue`` is served on 127.0.0.1 only and ``api/me`` answers 403: no student
identity can be trusted.
"""

from __future__ import annotations

import json
import os

import tornado.web


def _json(handler, data, status=200):
    handler.set_status(status)
    handler.set_header("Content-Type", "application/json; charset=utf-8")
    handler.set_header("Cache-Control", "no-store")
    handler.finish(json.dumps(data))


def make_app(service) -> tornado.web.Application:
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    if not prefix.endswith("/"):
        prefix += "/"
    hub = bool(os.environ.get("JUPYTERHUB_API_TOKEN"))
    if hub:
        from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated

        class Base(HubOAuthenticated, tornado.web.RequestHandler):
            def student(self):
                user = self.current_user
                return user.get("name") if user else None

        auth = tornado.web.authenticated
    else:
        HubOAuthCallbackHandler = None

        class Base(tornado.web.RequestHandler):  # type: ignore[no-redef]
            def student(self):
                return None

        def auth(method):
            return method

    class Queue(Base):
        @auth
        def get(self):
            _json(self, service.queue_status())

    class Me(Base):
        @auth
        def get(self):
            student = self.student()
            if not student:
                _json(self, {"error": "no JupyterHub login: run the service as a hub service"}, 403)
                return
            _json(self, service.student_status(student))

    routes = [
        (prefix + "api/queue", Queue),
        (prefix + "api/me", Me),
        (prefix, Queue),
    ]
    if HubOAuthCallbackHandler is not None:
        routes.append((prefix + "oauth_callback", HubOAuthCallbackHandler))
    return tornado.web.Application(routes, cookie_secret=os.urandom(32), xsrf_cookies=False)
