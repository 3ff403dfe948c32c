#!/usr/bin/env bash
# README command 2: set up .venv with the test extras and run lint, type checks and the whole suite
# (SQLite and the real PostgreSQL, a Chroma server, pgvector). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" test
source "$(dirname "${BASH_SOURCE[0]}")/_debian.sh"
# The drift benchmark's quick cases install pinned tools from the npm registry (Debian packages npm
# with Node.js), and tasks run in bubblewrap's namespaces (runtime_sandbox_isolation's default).
ensure_debian_package npm nodejs npm "the drift benchmark's npm cases"
ensure_debian_package bwrap bubblewrap "tasks run in namespaces"
ensure_debian_package chromium chromium "the web UI's browser tests (tests/web/test_browser.py)"
echo "== ruff" >&2
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
echo "== mypy" >&2
.venv/bin/mypy
echo "== pytest" >&2
set +e
# One worker per core, whole files per worker (module fixtures are built once); tests own their
# databases, Chroma namespaces and RabbitMQ exchanges, so they run side by side.
.venv/bin/pytest -n "${LIBRARIAN_TEST_WORKERS:-logical}" --dist loadfile --durations=25 "$@"
status=$?
set -e
# pytest exits 5 when it collected no test: that is a broken suite, never a pass.
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
