# Shared by the README commands: create .venv in the repository root and install the project.
# Usage: source scripts/_venv.sh EXTRAS   (EXTRAS like "demo" or "test")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x .venv/bin/python ]; then
  echo "creating .venv with $PYTHON" >&2
  "$PYTHON" -m venv .venv
fi
# A marker records what was installed, so a second run starts at once when nothing changed.
MARKER=".venv/.librarian-installed-$1"
STAMP="$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$MARKER" ] || [ "$(cat "$MARKER")" != "$STAMP" ]; then
  echo "installing librarian[$1] into .venv (first run: a few minutes)" >&2
  .venv/bin/python -m pip install --quiet --upgrade pip
  # torch is pinned to the CPU build in pyproject.toml; an unpinned torch pulls a CUDA build.
  .venv/bin/python -m pip install --quiet -e ".[$1]"
  echo "$STAMP" > "$MARKER"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
