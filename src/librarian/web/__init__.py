"""The web UI: server-rendered pages over the facade, served by ``librarian serve`` at ``/`` (``/ui``).

Pages read the same services the REST API reads; they hold no domain logic. Jinja2 escapes every
value (documents are untrusted HTML), forms carry a CSRF token (``security.py``), and a little
JavaScript (``static/ui.js``) follows a running workflow live; every page works without it.

``librarian.web.app.install_web`` mounts it on the REST app. Nothing is imported here, so a module of
the package (``web.dag``) can be imported on its own, without the app and the API it needs.
"""
