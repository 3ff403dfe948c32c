#!/usr/bin/env bash
# README command 2: set up .venv with the test extras and run lint, type checks and the whole suite
# (SQLite and the real PostgreSQL, a Chroma server, pgvector). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" test
echo "== ruff" >&2
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
echo "== mypy" >&2
.venv/bin/mypy
echo "== pytest" >&2
set +e
.venv/bin/pytest "$@"
status=$?
set -e
# pytest exits 5 when it collected no test: that is a broken suite, never a pass.
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
