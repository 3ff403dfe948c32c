"""Git sources cannot be turned against internal services: real git, real HTTP servers on loopback.

The hardening issue's reproductions: ``POST /sources`` with a public URL answering ``302`` to a loopback
git server cloned the internal repository and served its secret; ``ssh://169.254.169.254:80/x`` and
``git@127.0.0.1:repo`` were accepted, and git ran with the server's ``HOME`` and ``SSH_AUTH_SOCK``.

A loopback address stands for a public one by being listed in ``allowed_private_hosts`` (127.0.0.2),
so the redirect from it to 127.0.0.1 (not listed) is the public-to-internal redirect of the issue.
The git server is a plain static HTTP server over a bare repository (git's "dumb" HTTP protocol).
"""

from __future__ import annotations

import functools
import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import InvalidInputError
from librarian.ingest.sources.git_access import API_CALLER, GitAccess, git_transport


class _Server:
    """An HTTP server on a loopback address in a thread, recording the paths it was asked for."""

    def __init__(
        self, host: str, handler: type[http.server.BaseHTTPRequestHandler], **kwargs: object
    ) -> None:
        self.requests: list[str] = []
        recorder = self.requests

        class Recording(handler):  # type: ignore[valid-type,misc]
            def log_message(self, *args: object) -> None:
                recorder.append(self.path)

        self.httpd = http.server.ThreadingHTTPServer((host, 0), functools.partial(Recording, **kwargs))
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def internal_git(tmp_path: Path) -> Iterator[_Server]:
    """A bare repository holding a secret document, served over dumb HTTP on 127.0.0.1."""
    work = tmp_path / "work"
    (work / "docs").mkdir(parents=True)
    (work / "docs" / "secret.md").write_text("# Internal\n\nThe vault password is hunter2-internal.\n")
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "secret"]):
        subprocess.run(["git", *args], cwd=work, check=True, env={**env, "PATH": "/usr/bin:/bin"})
    served = tmp_path / "served"
    served.mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(served / "repo.git")], check=True)
    subprocess.run(["git", "update-server-info"], cwd=served / "repo.git", check=True)
    server = _Server("127.0.0.1", http.server.SimpleHTTPRequestHandler, directory=str(served))
    yield server
    server.close()


@pytest.fixture
def redirector(internal_git: _Server) -> Iterator[_Server]:
    """Stands for a public host (127.0.0.2) answering every request with a redirect to the internal server."""

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", internal_git.url + self.path)
            self.end_headers()

    server = _Server("127.0.0.2", Redirect)
    yield server
    server.close()


@pytest.fixture
def lib(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    with Librarian(Settings(home=tmp_path / "home"), embedder=embedder) as librarian:
        yield librarian


def _caller(*allowed: str) -> GitAccess:
    return GitAccess(credentials=False, ssh=False, allow_private=False, allowed_private_hosts=allowed)


def test_a_redirect_from_a_public_host_to_an_internal_git_server_is_refused(
    lib: Librarian, redirector: _Server, internal_git: _Server
) -> None:
    with pytest.raises(InvalidInputError, match=r"127\.0\.0\.1 is a loopback address"):
        lib.ingest(f"{redirector.url}/repo.git", git_access=_caller("127.0.0.2"))
    assert redirector.requests, "the public host was asked"
    assert internal_git.requests == [], "nothing reached the internal server"
    assert not lib.search("vault password")


def test_a_redirect_is_followed_when_its_target_is_allowed(
    lib: Librarian, redirector: _Server, internal_git: _Server
) -> None:
    report = lib.ingest(f"{redirector.url}/repo.git", git_access=_caller("127.0.0.2", "127.0.0.1"))
    assert report.status == "ok" and report.added == 1
    assert "hunter2-internal" in lib.search("vault password")[0].content


def test_the_operator_reaches_its_own_internal_server_by_name(lib: Librarian, internal_git: _Server) -> None:
    """The operator's default access: a host whose own address is internal is the operator's choice."""
    url = internal_git.url.replace("127.0.0.1", "localhost") + "/repo.git"
    report = lib.ingest(url, sdk_name="internal", sdk_version="1")
    assert report.status == "ok" and report.added == 1


def test_an_api_caller_s_source_keeps_its_access_on_refresh(
    lib: Librarian, redirector: _Server, internal_git: _Server
) -> None:
    with pytest.raises(InvalidInputError):
        lib.ingest(f"{redirector.url}/repo.git", git_access=_caller("127.0.0.2"))
    with pytest.raises(InvalidInputError, match="loopback"):
        lib.ingest(f"{redirector.url}/repo.git")  # again, as a refresh would: the stored access holds
    assert internal_git.requests == []


def test_git_for_an_api_caller_gets_no_server_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", "/run/agent.sock")
    transport = git_transport(str(tmp_path), API_CALLER, git_home=tmp_path / "git-home", timeout=5)
    assert "SSH_AUTH_SOCK" not in transport.env
    assert transport.env["HOME"] == str(tmp_path / "git-home") and not any((tmp_path / "git-home").iterdir())
    assert "IdentityAgent=none" in transport.env["GIT_SSH_COMMAND"]
    assert "protocol.allow=never" in transport.config and "protocol.file.allow=always" in transport.config
    with pytest.raises(InvalidInputError, match="ssh git sources are not accepted"):
        git_transport("git@github.com:org/repo.git", API_CALLER, git_home=tmp_path / "h", timeout=5)


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("ssh://169.254.169.254:80/x", "link-local"),
        ("git@127.0.0.1:repo", "loopback"),
        ("ssh://127.0.0.1:8081/internal.git", "loopback"),
    ],
)
def test_rest_refuses_ssh_sources_and_internal_ssh_hosts(lib: Librarian, uri: str, problem: str) -> None:
    with TestClient(create_app(lib)) as default:
        refused = default.post("/sources", json={"uri": uri})
    assert refused.status_code == 422 and "--allow-ssh-sources" in str(refused.json())
    with TestClient(create_app(lib, allow_ssh=True)) as ssh_allowed:
        internal = ssh_allowed.post("/sources", json={"uri": uri})
    assert internal.status_code == 422 and problem in internal.json()["message"]
