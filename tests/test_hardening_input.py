"""Bad input gets one clear error, never a traceback: the hardening reproductions, through the real CLI.

Each test is a reproduction that gave a raw traceback (or a wrong port) before: a superscript digit as a
source selector, an error text naming 600 options, a data directory that cannot exist, a port out of
range or in use, a workflow file of invalid UTF-8 or 5,000 brackets deep.
"""

from __future__ import annotations

import socket
from pathlib import Path

from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.research.service import research_api_usage
from tests.cli.test_cli import run


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text, text


def test_a_superscript_digit_selects_no_source(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    result = run(tmp_path / "home", "refresh", "\u00b2", check=1)
    assert "no source matches '\u00b2'" in result.stderr
    _no_traceback(result.stderr)
    with Librarian(Settings(home=tmp_path / "api"), embedder=embedder) as lib:
        response = TestClient(create_app(lib)).post("/sources/%C2%B9/refresh")
    assert response.status_code == 404 and "no source matches" in response.json()["message"]


def test_an_error_naming_hundreds_of_options_is_researched(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cp.md").write_text("# aws s3 cp\n\nUse `--tagging` to tag the object.\n")
    home = tmp_path / "home"
    with Librarian(Settings(home=home), embedder=embedder) as lib:
        lib.ingest(str(docs), sdk_name="aws", sdk_version="2.0")
        options = " ".join(f"--option-{n}" for n in range(600))
        answer = research_api_usage(lib, "aws", "upload a file", error_text=f"Unknown options: {options}")
    assert answer["resolved_version"] == "2.0" and answer["snippets"]


def test_an_unusable_data_directory_is_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for home, why in ((Path("/proc/1/nope"), "No such file or directory"), (a_file, "it is a file")):
        result = run(home, "sdks", check=1)
        assert f"the data directory {home} cannot be used: {why}" in result.stderr
        _no_traceback(result.stderr)


def test_serve_refuses_a_port_out_of_range_and_a_port_in_use(tmp_path: Path) -> None:
    out_of_range = run(tmp_path / "home", "serve", "--port", "99999", check=2)
    assert "--port" in out_of_range.stderr and "65535" in out_of_range.stderr
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        in_use = run(tmp_path / "home", "serve", "--port", str(port), "--no-mcp", check=1)
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in in_use.stderr
    _no_traceback(in_use.stderr)


def test_workflow_files_that_break_the_parser_are_one_line(tmp_path: Path) -> None:
    cases = {
        "bad-bytes.yaml": (b"tasks: []\n\xff\n", "is not UTF-8 text"),
        "deep.yaml": (b"[" * 5000 + b"]" * 5000, "nested"),
        "deep.json": (b"[" * 5000 + b"]" * 5000, "nested"),
    }
    for name, (data, said) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        result = run(tmp_path / "home", "workflow", "run", str(path), check=1)
        assert name in result.stderr and said in result.stderr, result.stderr
        _no_traceback(result.stderr)
