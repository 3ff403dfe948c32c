"""``librarian demo`` end to end: the real AWS CLI, a real S3 server, docs indexed from an empty home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from librarian.app import Librarian
from librarian.cli.demo import demo
from librarian.config import Settings
from librarian.incidents.signature import ProblemSignature

# The same commands a search for the upload meets in the full s3/s3api trees (the right one among
# look-alikes that also take --tagging), so the test indexes in seconds rather than minutes.
SCOPES = (
    "s3 cp",
    "s3api put-object",
    "s3api put-object-tagging",
    "s3api put-bucket-tagging",
    "s3api get-object-tagging",
    "s3api copy-object",
    "s3api create-multipart-upload",
    "s3api create-bucket",
)

app = typer.Typer()
app.command()(demo)


@app.command()
def version() -> None:
    """A second command, so that typer keeps ``demo`` as a named subcommand."""


@pytest.mark.slow
def test_librarian_demo_fixes_the_upload_then_reuses_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBRARIAN_HOME", str(tmp_path / "home"))
    for name in (
        "LIBRARIAN_DATABASE_URL",
        "LIBRARIAN_BROKER_URL",
        "LIBRARIAN_VECTOR_URL",
        "LIBRARIAN_LLM_PROVIDER",
    ):
        monkeypatch.delenv(name, raising=False)
    scopes = [arg for scope in SCOPES for arg in ("--scope", scope)]

    result = CliRunner().invoke(app, ["demo", "--json", *scopes])

    assert result.exit_code == 0, result.output
    output = json.loads(result.stdout)
    first, second = output["runs"]
    assert output["docs"]["ingested"] is True and output["docs"]["sdk_version"] == output["tool_version"]
    assert first["succeeded"] and second["succeeded"]
    assert first["research_calls"] == 1 and first["strategy"] == "synopsis_rewrite"
    assert first["final_command"][:3] == ["aws", "s3api", "put-object"]
    assert " ".join(first["final_command"]).endswith("--tagging compliance=strict")
    assert second["research_calls"] == 0 and (second["strategy"], second["source"]) == (
        "learned_fix",
        "knowledge_base",
    )
    assert second["final_command"] == first["final_command"]
    assert second["correction_seconds"] < 0.5 * first["correction_seconds"]
    assert first["learned"][0]["new_fix"] and second["learned"][0]["successes"] == 2
    assert output["object_tags"] == [{"Key": "compliance", "Value": "strict"}]
    assert first["object_tags"] == second["object_tags"] == output["object_tags"]

    # Each fixed run saved its investigation as an incident the next agent finds, and the verified
    # fix is the solution get_solution offers for that error, with both successes counted.
    with Librarian(Settings(home=tmp_path / "home")) as lib:
        me = lib.default_principal
        incidents = [i for i in lib.incidents.list_incidents(me) if i["workflow_id"]]
        assert len(incidents) == 2 and all(i["was_successful"] for i in incidents)
        saved = lib.incidents.get(me, incidents[0]["id"])
        error = saved["problem_signature"]["error_messages"][0]
        similar = lib.incidents.find_similar(
            me, "upload with tags", signature=ProblemSignature(error_messages=(error,))
        )
        assert {i["id"] for i in similar[:2]} == {i["id"] for i in incidents}
    # The demo keeps its runtime (and so its verified fixes) in <home>/demo, apart from the user's
    # store; a store sharing the runtime's database offers them as solutions.
    with Librarian(Settings(home=tmp_path / "home" / "demo")) as runtime_store:
        solutions = runtime_store.solutions.get_solution(
            runtime_store.default_principal, ProblemSignature(error_messages=(error,))
        )
        fix = next(s for s in solutions if s["kind"] == "verified_fix")
        assert fix["successes"] == 2 and "s3api put-object" in fix["solution"]

    # Again, for a person: the docs are kept, the memory of fixes starts empty, the story is printed.
    again = CliRunner().invoke(app, ["demo", *scopes], env={"COLUMNS": "200"})

    assert again.exit_code == 0, again.output
    text = again.stdout
    assert "already indexed" in text
    for line in ("failure", "trigger", "research", "correction", "surgery", "reward", "learned"):
        assert f" {line} " in text, line
    assert "DAG before surgery" in text and "DAG after surgery, run 1" in text
    assert "s3api put-object" in text and "compliance" in text
