"""Refreshing sources: incremental re-ingest per kind, selectors, due times and the scheduler's rounds."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import InvalidInputError, NotFoundError
from librarian.refresh import FAILED_RETRY_SECONDS, due_sources, refresh_sources, select_sources
from librarian.refresh_schedule import Scheduler, set_refresh_interval
from librarian.storage.models import Chunk, Document, Source
from tests.ingest.test_crawler_site import chain_page, demo_site, serve

DOCS = {
    "upload.md": "# Uploading\n\nUse `acme upload FILE` to upload a file.\n",
    "queues.md": "# Queues\n\nUse `acme send --queue URL` to send a message.\n",
    "tags.md": "# Tags\n\nUse `acme tag --key K` to tag an object.\n",
}


@pytest.fixture
def lib(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    with Librarian(Settings(home=tmp_path / "home"), embedder=embedder) as library:
        yield library


def write_docs(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def chunk_ids_by_path(lib: Librarian, source_id: int) -> dict[str, set[int]]:
    with lib.sessions() as session:
        rows = session.execute(
            select(Document.path, Chunk.id)
            .join(Chunk, Chunk.document_id == Document.id)
            .where(Document.source_id == source_id)
        ).all()
    found: dict[str, set[int]] = {}
    for path, chunk_id in rows:
        found.setdefault(path, set()).add(chunk_id)
    return found


def last_ingested(lib: Librarian, source_id: int) -> datetime:
    with lib.sessions() as session:
        source = session.get(Source, source_id)
        assert source is not None and source.last_ingested_at is not None
        moment = source.last_ingested_at
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


# -- folders and git --------------------------------------------------------------------------------


def test_refreshing_a_folder_rechunks_only_the_edited_file(lib: Librarian, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs", DOCS)
    source_id = lib.ingest(str(docs), sdk_name="acme", sdk_version="1.0").source_id
    assert source_id is not None
    before = chunk_ids_by_path(lib, source_id)
    (docs / "upload.md").write_text("# Uploading\n\nUse `acme put --resumable FILE` to upload.\n")

    (outcome,) = refresh_sources(lib, str(docs))

    assert outcome.status == "ok" and outcome.source_id == source_id and not outcome.new_version
    assert outcome.report is not None
    assert (outcome.report["updated"], outcome.report["unchanged"], outcome.report["added"]) == (1, 2, 0)
    after = chunk_ids_by_path(lib, source_id)
    assert after["queues.md"] == before["queues.md"] and after["tags.md"] == before["tags.md"]
    assert after["upload.md"].isdisjoint(before["upload.md"])
    top = lib.search("resumable upload", sdk_name="acme", sdk_version="1.0", top_k=1)[0]
    assert "--resumable" in top.content

    (again,) = refresh_sources(lib, str(source_id))
    assert again.status == "unchanged" and again.report is not None and again.report["unchanged"] == 3


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def test_refreshing_a_git_branch_fetches_its_new_commits(lib: Librarian, tmp_path: Path) -> None:
    repo = write_docs(tmp_path / "repo" / "docs", DOCS).parent
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    report = lib.ingest(str(repo), ref="main", sdk_name="syncer", sdk_version="2")
    assert report.status == "ok" and report.source_id is not None
    (repo / "docs" / "queues.md").write_text("# Queues\n\nUse `acme send --fifo` for ordered delivery.\n")
    (repo / "docs" / "tags.md").unlink()
    git(repo, "commit", "-q", "-am", "second")

    (outcome,) = refresh_sources(lib, "syncer")

    assert outcome.status == "ok" and outcome.report is not None
    assert (outcome.report["updated"], outcome.report["deleted"], outcome.report["unchanged"]) == (1, 1, 1)
    assert outcome.report["revision"] == git(repo, "rev-parse", "HEAD")
    assert "--fifo" in lib.search("ordered delivery", sdk_name="syncer", top_k=1)[0].content


# -- selectors and failures ----------------------------------------------------------------------


def test_selectors_name_sources_by_id_key_uri_path_or_sdk(lib: Librarian, tmp_path: Path) -> None:
    first = write_docs(tmp_path / "one", {"a.md": "# A\n\nalpha\n"})
    second = write_docs(tmp_path / "two", {"b.md": "# B\n\nbeta\n"})
    one = lib.ingest(str(first), sdk_name="aws-cli", sdk_version="1")
    two = lib.ingest(str(second), sdk_name="aws-cli", sdk_version="2")
    with lib.sessions() as session:
        key = session.scalars(select(Source.source_key).where(Source.id == two.source_id)).one()

    assert [t.id for t in select_sources(lib, str(one.source_id))] == [one.source_id]
    assert [t.id for t in select_sources(lib, key[:8])] == [two.source_id]
    assert [t.id for t in select_sources(lib, str(second.resolve()))] == [two.source_id]
    assert [t.id for t in select_sources(lib, str(tmp_path / "one" / ".." / "one"))] == [one.source_id]
    assert [t.id for t in select_sources(lib, "awscli")] == [one.source_id, two.source_id]
    assert [t.id for t in select_sources(lib, None)] == [one.source_id, two.source_id]
    with pytest.raises(NotFoundError, match="no source matches 'gcloud'"):
        refresh_sources(lib, "gcloud")
    with pytest.raises(NotFoundError, match="'99'"):
        select_sources(lib, "99")


def test_a_failing_source_is_recorded_and_the_others_go_on(lib: Librarian, tmp_path: Path) -> None:
    doomed = write_docs(tmp_path / "doomed", {"a.md": "# A\n\nalpha\n"})
    kept = write_docs(tmp_path / "kept", {"b.md": "# B\n\nbeta\n"})
    lib.ingest(str(doomed), sdk_name="acme", sdk_version="1")
    lib.ingest(str(kept), sdk_name="acme", sdk_version="2")
    (doomed / "a.md").unlink()
    doomed.rmdir()

    outcomes = refresh_sources(lib)

    assert [o.status for o in outcomes] == ["failed", "unchanged"]
    assert outcomes[0].error is not None and outcomes[0].error["category"] == "not_found"
    stored = {row["uri"]: row for row in lib.sources()}
    assert stored[str(doomed.resolve())]["last_status"] == "failed"
    assert stored[str(doomed.resolve())]["last_errors"][0]["path"] == str(doomed.resolve())
    assert stored[str(kept.resolve())]["last_status"] == "unchanged"


# -- due times and the scheduler --------------------------------------------------------------------


def test_the_scheduler_refreshes_only_due_sources(lib: Librarian, tmp_path: Path) -> None:
    hourly = write_docs(tmp_path / "hourly", {"a.md": "# A\n\nalpha\n"})
    daily = write_docs(tmp_path / "daily", {"b.md": "# B\n\nbeta\n"})
    hourly_id = lib.ingest(str(hourly), sdk_name="acme", sdk_version="1").source_id
    daily_id = lib.ingest(str(daily), sdk_name="acme", sdk_version="2").source_id
    assert hourly_id is not None and daily_id is not None
    (updated,) = set_refresh_interval(lib, str(hourly_id), 3600)
    assert updated.interval_seconds == 3600 and updated.own_interval
    (hourly / "a.md").write_text("# A\n\nalpha, revised\n")
    ingested = last_ingested(lib, daily_id)
    scheduler = Scheduler(lib, poll_seconds=60, stop=threading.Event())

    assert scheduler.run_once(now=ingested + timedelta(minutes=30)) == []
    outcomes = scheduler.run_once(now=ingested + timedelta(hours=2))

    assert [(o.source_id, o.status) for o in outcomes] == [(hourly_id, "ok")]
    assert last_ingested(lib, daily_id) == ingested
    assert {t.id for t in due_sources(lib, ingested + timedelta(days=2))} == {daily_id, hourly_id}
    # Back to the default interval (a day): no longer due two hours after its refresh.
    set_refresh_interval(lib, str(hourly_id), None)
    assert due_sources(lib, last_ingested(lib, hourly_id) + timedelta(hours=2)) == []


def test_a_failed_source_is_retried_soon_not_at_its_interval(lib: Librarian, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        lib.ingest(str(tmp_path / "missing"), sdk_name="acme", sdk_version="1")
    failed_at = datetime.now(UTC)

    assert due_sources(lib, failed_at + timedelta(seconds=FAILED_RETRY_SECONDS - 30)) == []
    (due,) = due_sources(lib, failed_at + timedelta(seconds=FAILED_RETRY_SECONDS + 30))
    assert due.last_status == "failed"


def test_intervals_shorter_than_a_minute_are_refused(lib: Librarian, tmp_path: Path) -> None:
    lib.ingest(str(write_docs(tmp_path / "docs", {"a.md": "# A\n\nalpha\n"})))
    with pytest.raises(InvalidInputError, match="too short"):
        set_refresh_interval(lib, "1", 5)


def test_a_stop_request_ends_the_round_between_two_sources(lib: Librarian, tmp_path: Path) -> None:
    lib.ingest(str(write_docs(tmp_path / "one", {"a.md": "# A\n\nalpha\n"})))
    lib.ingest(str(write_docs(tmp_path / "two", {"b.md": "# B\n\nbeta\n"})))
    stop = threading.Event()
    stop.set()

    assert Scheduler(lib, poll_seconds=1, stop=stop).run_once(datetime.now(UTC) + timedelta(days=2)) == []


# -- connectors that report their own version --------------------------------------------------------

MINICLI = """\
#!{python}
import json, sys
state = json.load(open({state!r}))
args = sys.argv[1:]
if args == ["--version"]:
    print("minicli version " + state["version"])
elif args == ["--help"]:
    print("Usage: minicli <command> [options]\\n\\nCommands:")
    for name in sorted(state["commands"]):
        print("  " + name.ljust(12) + "  " + state["commands"][name]["summary"])
elif len(args) == 2 and args[1] == "--help" and args[0] in state["commands"]:
    command = state["commands"][args[0]]
    print("Usage: minicli " + args[0] + " [options]\\n\\n" + command["summary"] + "\\n\\nOptions:")
    for option, text in command["options"].items():
        print("  " + option.ljust(20) + "  " + text)
else:
    sys.exit(2)
"""


@pytest.fixture
def minicli(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny CLI whose version and help come from a JSON file the test edits (an "upgrade")."""
    state = tmp_path / "minicli.json"
    state.write_text(
        json.dumps(
            {
                "version": "1.0.0",
                "commands": {
                    "upload": {"summary": "Upload a file.", "options": {"--bucket <name>": "Target."}},
                    "list": {"summary": "List files.", "options": {"--long": "Show details."}},
                },
            }
        )
    )
    script = tmp_path / "bin" / "minicli"
    script.parent.mkdir()
    script.write_text(MINICLI.format(python=sys.executable, state=str(state)))
    script.chmod(0o755)
    return script, state


def edit_state(state: Path, version: str | None = None, upload_option: str | None = None) -> None:
    data = json.loads(state.read_text())
    if version is not None:
        data["version"] = version
    if upload_option is not None:
        data["commands"]["upload"]["options"][upload_option] = "New in this release."
    state.write_text(json.dumps(data))


def test_refreshing_a_cli_repeats_its_walk_incrementally(lib: Librarian, minicli: tuple[Path, Path]) -> None:
    script, state = minicli
    first = lib.ingest_cli(str(script), sdk_name="minicli", scopes=("upload", "list"), max_depth=1)
    assert first.status == "ok" and first.source_id is not None
    edit_state(state, upload_option="--tagging <tags>")

    (outcome,) = refresh_sources(lib, "minicli")

    assert outcome.status == "ok" and outcome.source_id == first.source_id and not outcome.new_version
    assert outcome.report is not None and outcome.report["updated"] == 1
    assert outcome.report["unchanged"] == first.added - 1
    hits = lib.search("upload with tags", sdk_name="minicli", sdk_version="1.0.0", top_k=1)
    assert "--tagging" in hits[0].content


def test_an_upgraded_cli_is_ingested_as_a_new_version_and_the_old_one_kept(
    lib: Librarian, minicli: tuple[Path, Path]
) -> None:
    script, state = minicli
    old = lib.ingest_cli(str(script), sdk_name="minicli", max_depth=1)
    assert old.source_id is not None
    edit_state(state, version="2.0.0", upload_option="--tagging <tags>")

    (outcome,) = refresh_sources(lib, str(old.source_id))

    assert outcome.new_version and outcome.ingested_version == "2.0.0"
    assert outcome.note is not None and "1.0.0" in outcome.note and "kept" in outcome.note
    versions = {row["sdk_version"]: row for row in lib.sources()}
    assert set(versions) == {"1.0.0", "2.0.0"}
    assert versions["2.0.0"]["id"] == outcome.ingested_source_id
    old_hits = lib.search("upload with tags", sdk_name="minicli", sdk_version="1.0.0", top_k=10)
    new_hits = lib.search("upload with tags", sdk_name="minicli", sdk_version="2.0.0", top_k=1)
    assert old_hits and not any("--tagging" in hit.content for hit in old_hits)
    assert "--tagging" in new_hits[0].content

    # The old version is superseded: refreshing the SDK runs the walk once, on the new source.
    outcomes = refresh_sources(lib, "minicli")
    assert [(o.sdk_version, o.status) for o in outcomes] == [("1.0.0", "skipped"), ("2.0.0", "unchanged")]
    later = datetime.now(UTC) + timedelta(days=3)
    assert [t.sdk_version for t in due_sources(lib, later)] == ["2.0.0"]


def test_a_cli_that_disappeared_fails_and_is_recorded(lib: Librarian, minicli: tuple[Path, Path]) -> None:
    script, _state = minicli
    lib.ingest_cli(str(script), sdk_name="minicli", max_depth=1)
    script.unlink()

    (outcome,) = refresh_sources(lib, "minicli")

    assert outcome.status == "failed"
    (row,) = lib.sources()
    assert row["last_status"] == "failed" and row["last_errors"]


def test_refreshing_an_openapi_document_picks_up_new_operations(lib: Librarian, tmp_path: Path) -> None:
    spec = tmp_path / "pets.yaml"
    operations = "  /pets:\n    get:\n      summary: List pets\n      responses: {'200': {description: OK}}\n"
    header = "openapi: 3.0.3\ninfo: {title: Pets, version: 1.2.0}\npaths:\n"
    spec.write_text(header + operations)
    first = lib.ingest_openapi(str(spec), sdk_name="petstore")
    spec.write_text(
        header
        + operations
        + "  /pets/{id}:\n    delete:\n      summary: Remove a pet\n"
        + "      parameters: [{name: id, in: path, required: true, schema: {type: string}}]\n"
        + "      responses: {'204': {description: Gone}}\n"
    )

    (outcome,) = refresh_sources(lib, "petstore")

    assert outcome.status == "ok" and outcome.source_id == first.source_id
    assert outcome.report is not None and (outcome.report["added"], outcome.report["unchanged"]) == (1, 1)
    assert lib.search("remove a pet", sdk_name="petstore", top_k=1)[0].entity_name == "DELETE /pets/{id}"


def test_refreshing_a_website_asks_for_changed_pages_only(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    settings = Settings(
        home=tmp_path / "home", allowed_private_hosts=["127.0.0.1"], crawl_requests_per_second=1000
    )
    for site in serve(demo_site()):
        with Librarian(settings, embedder=embedder) as library:
            first = library.crawl(f"{site.base}/docs/", sdk_name="demo", sdk_version="1.0")
            site.html("/docs/deep/three.html", chain_page("Deep three, revised", None))
            site.requests.clear()

            (outcome,) = refresh_sources(library, "demo")

            assert outcome.source_id == first.source_id and not outcome.new_version
            assert outcome.report is not None
            assert (outcome.report["updated"], outcome.report["unchanged"]) == (1, first.added - 1)
            conditional = [path for path, headers, _ in site.requests if "If-None-Match" in headers]
            assert len(conditional) == first.added
            assert "revised" in library.search("deep three", sdk_name="demo", top_k=1)[0].content
