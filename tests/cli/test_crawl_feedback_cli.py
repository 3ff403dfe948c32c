"""``crawl`` and ``feedback`` as real subprocesses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import run
from tests.ingest.test_crawler_site import Site, demo_site, serve


@pytest.fixture
def site() -> Iterator[Site]:
    yield from serve(demo_site())


def test_crawl_ingests_a_site_and_a_second_crawl_is_conditional(tmp_path: Path, site: Site) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # Loopback is refused unless the configuration names it.
    refused = run(home, "crawl", f"{site.base}/docs/", "--sdk", "demo", "--version", "1.0", check=1)
    assert "127.0.0.1" in refused.stderr
    (home / "config.toml").write_text('allowed_private_hosts = ["127.0.0.1"]\n', encoding="utf-8")

    first = run(
        home, "crawl", f"{site.base}/docs/", "--sdk", "demo", "--version", "1.0", "--json", check=None
    )
    second = run(
        home, "crawl", f"{site.base}/docs/", "--sdk", "demo", "--version", "1.0", "--json", check=None
    )

    # The demo site has a broken link and a binary page on purpose: the first crawl reports them
    # (exit 3); the second only asks for known pages conditionally, and all answer 304.
    assert first.returncode == 3 and second.returncode == 0, first.stderr + second.stderr
    assert json.loads(first.stdout)["added"] >= 5
    assert json.loads(second.stdout)["unchanged"] >= 5 and json.loads(second.stdout)["added"] == 0
    conditional = [h for _, headers, _ in site.requests for h in headers if h.lower() == "if-none-match"]
    assert conditional


def test_feedback_is_recorded_scrubbed_and_moves_the_snippet(tmp_path: Path) -> None:
    home = tmp_path / "home"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "upload.md").write_text("# upload\n\nUpload a file. Options: `--tag KEY=VALUE`.\n")
    (docs / "tag.md").write_text("# tag\n\nSet tags on an uploaded file with `--tag KEY=VALUE`.\n")
    run(home, "ingest", str(docs), "--sdk", "acme", "--version", "1.0")
    error = "error: unknown option --tag"
    before = json.loads(run(home, "research", "upload a file with tags", "--sdk", "acme", "--json").stdout)
    last = before["snippets"][-1]

    stored = json.loads(
        run(
            home,
            "feedback",
            "--sdk",
            "acme",
            "--error",
            error,
            "--source-url",
            last["source_url"],
            "--entity",
            last["entity_name"],
            "--command",
            "acme upload --password hunter2 report.csv",
            "--json",
        ).stdout
    )
    after = json.loads(
        run(home, "research", "upload a file with tags", "--sdk", "acme", "--error", error, "--json").stdout
    )

    assert stored["helpful"] is True and "hunter2" not in stored["command"]
    moved = next(s for s in after["snippets"] if s["source_url"] == last["source_url"])
    assert moved["feedback"]["helpful"] == 1
    empty = run(home, "feedback", "--sdk", "acme", "--error", " ", "--source-url", "x", check=1)
    assert "error_text" in empty.stderr
