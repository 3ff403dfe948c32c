#!/usr/bin/env bash
# README command 2: set up .venv with the test extras and run lint, type checks and the whole suite
# (SQLite and the real PostgreSQL, a Chroma server, pgvector). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" test
# The drift benchmark's quick cases install pinned tools from PyPI and the npm registry: a fresh
# machine may lack npm (Debian packages it with Node.js).
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing nodejs and npm (apt-get)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "npm is missing and cannot be installed here (not root, or no apt-get)" >&2
  fi
fi
# Tasks run in bubblewrap's namespaces (runtime_sandbox_isolation = "namespaces", the default).
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing bubblewrap (apt-get)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "bubblewrap is missing and cannot be installed here (not root, or no apt-get)" >&2
  fi
fi
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
