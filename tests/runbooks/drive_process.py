"""A process that starts a runbook execution and drives it, for the kill -9 test.

    python -m tests.runbooks.drive_process HOME RUNBOOK_ID

prints the execution id on its first line, then drives the run until it waits or ends. The store
and broker come from the environment (``LIBRARIAN_DATABASE_URL``, ``LIBRARIAN_BROKER_URL``): with a
broker, bash steps go to ``librarian worker`` processes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from librarian.app import Librarian
from librarian.config import Settings


def main() -> None:
    home, runbook_id = Path(sys.argv[1]), int(sys.argv[2])
    with Librarian(Settings(home=home)) as lib:
        started = lib.runbooks.start(lib.default_principal, runbook_id, run=False)
        print(started["id"], flush=True)
        lib.runbooks.engine.drive(started["id"])
        print("finished", flush=True)


if __name__ == "__main__":
    main()
