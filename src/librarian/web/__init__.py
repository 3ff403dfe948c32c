"""The web UI: server-rendered pages over the facade, served by ``librarian serve`` at ``/`` (``/ui``).

Pages read the same services the REST API reads; they hold no domain logic. Jinja2 escapes every
value (documents are untrusted HTML), forms carry a CSRF token (``security.py``), and a little
JavaScript (``static/ui.js``) follows a running workflow live; every page works without it.
"""

from librarian.web.app import install_web

__all__ = ["install_web"]
