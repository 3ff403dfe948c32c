"""One-shot ``librarian search`` wall time and peak memory, in process and through a running server
(issue 17: under 1 s with a server running, under half of today's without).

A small corpus is ingested into a scratch data directory; then ``librarian search`` runs ``--runs``
times in each of three ways, side by side in one run: in process with PyTorch embedding the query
(``LIBRARIAN_NO_SERVER=1 LIBRARIAN_EMBEDDING_NUMPY_QUERIES=false``: the path before the NumPy
encoder), in process with the NumPy encoder (``LIBRARIAN_NO_SERVER=1``: today's default), and while
``librarian serve`` runs for the same directory (cli/fast.py). Each run is a fresh process timed by
``/usr/bin/time`` (elapsed seconds, maximum resident set size).

    .venv/bin/python -m bench.cli_oneshot --runs 5
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from librarian.app import Librarian
from librarian.config import Settings
from librarian.server_file import running_server

FAST = [sys.executable, "-m", "librarian.cli.fast"]


def timed(home: Path, env: dict[str, str]) -> tuple[float, float]:
    """Seconds and MiB of one ``librarian search``."""
    command = [
        "/usr/bin/time",
        "-f",
        "%e %M",
        *FAST,
        "--home",
        str(home),
        "search",
        "create a queue",
        "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    seconds, kilobytes = done.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kilobytes) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as scratch:
        home, docs = Path(scratch) / "home", Path(scratch) / "docs"
        docs.mkdir()
        for index in range(50):
            (docs / f"queue{index}.md").write_text(
                f"# create-queue-{index}\n\nCreates queue number {index}.\n"
            )
        with Librarian(Settings(home=home)) as lib:
            lib.ingest(str(docs), sdk_name="tool", sdk_version="1")
        torch_runs: list[tuple[float, float]] = []
        local: list[tuple[float, float]] = []
        for _ in range(args.runs):  # alternating, so a busy moment of the machine hits both alike
            torch_runs.append(
                timed(home, {**env, "LIBRARIAN_NO_SERVER": "1", "LIBRARIAN_EMBEDDING_NUMPY_QUERIES": "false"})
            )
            local.append(timed(home, {**env, "LIBRARIAN_NO_SERVER": "1"}))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen(
            [*FAST, "--home", str(home), "serve", "--port", str(port), "--no-mcp"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while running_server(home) is None:
                time.sleep(0.2)
            timed(home, env)  # the server's first query loads its model: not a one-shot cost
            served = [timed(home, env) for _ in range(args.runs)]
        finally:
            server.terminate()
            server.wait(30)
    for label, runs in (
        ("in process, PyTorch", torch_runs),
        ("in process, NumPy", local),
        ("with librarian serve", served),
    ):
        seconds = statistics.median(run[0] for run in runs)
        memory = statistics.median(run[1] for run in runs)
        print(f"{label:>22}: {seconds:.2f} s wall, {memory:.0f} MiB peak (median of {len(runs)})")


if __name__ == "__main__":
    main()
