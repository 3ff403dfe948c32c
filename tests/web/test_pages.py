"""The web UI's pages over HTTP (no browser): sign-in, CSRF, escaping, access control, forms.

The browser tests (test_browser.py) show the pages work for a person; these pin down the rules an
attacker would probe: another site's form, a stolen redirect, a cookie sent to the REST API, a
document holding HTML, another organisation's data.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.correction.models import VerifiedFix
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.incidents.service import IncidentDraft
from librarian.knowledge.documents import DocumentDraft
from librarian.runbooks.catalog import RunbookInput
from tests.mcp.test_mcp_runbooks import TRIAGE

HELLO = """\
name: hello
tasks:
  - id: greet
    executor_type: command_executor
    payload: {argv: [echo, hello]}
"""


@dataclass
class Site:
    """The app, the tokens of alice (write) and root (admin) of acme, eve (admin, globex) and local
    (admin of the local organisation), the folder it may ingest, and the facade."""

    app: object
    tokens: dict[str, str]
    docs: Path
    lib: Librarian

    def browser(self, user: str | None = None) -> TestClient:
        """A client that keeps cookies, like a browser; signed in as ``user`` when given."""
        client = TestClient(self.app, base_url="http://testserver")  # type: ignore[arg-type]
        if user is not None:
            page = client.get("/ui/sign-in")
            signed = client.post(
                "/ui/sign-in",
                data={"token": self.tokens[user], "next": "/ui/search", "csrf": csrf_of(page.text)},
                follow_redirects=False,
            )
            assert signed.status_code == 303, signed.text
        return client


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field in the page"
    return found.group(1)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("web-pages")
    docs = root / "docs"
    docs.mkdir()
    (docs / "queue.md").write_text("# Queue\n\nThe ingest queue retries a failed upload three times.\n")
    settings = Settings(home=root / "home", runtime_workers=2)
    with Librarian(settings, embedder=embedder) as lib:
        operator = lib.default_principal
        tokens = {}
        for organization, name, admin in (
            ("acme", "alice", False),
            ("acme", "root", True),
            ("globex", "eve", True),
        ):
            if name != "root":
                lib.identity.create_organization(operator, organization)
            lib.identity.create_user(operator, organization, name, admin=admin)
            scopes = ["admin"] if admin else ["write"]
            tokens[name] = lib.identity.create_token(operator, organization, name, scopes=scopes)["token"]
        # The local organisation's own administrator: verified fixes are shown to it alone.
        tokens["local"] = lib.identity.create_token(operator, 1, 1, scopes=["admin"])["token"]
        alice = lib.identity.authenticate(tokens["alice"])
        lib.knowledge.documents.create(
            alice,
            DocumentDraft(
                title="Acme payroll <b>runbook</b>",
                content="Rotate the payroll signing key <script>alert('x')</script> every quarter.",
                document_type="runbook",
                visibility="organization",
            ),
        )
        yield Site(create_app(lib, allowed_roots=[str(docs)]), tokens, docs, lib)


def test_pages_need_a_session_when_tokens_exist_and_the_cookie_never_opens_the_api(site: Site) -> None:
    anonymous = site.browser()
    bounced = anonymous.get("/ui/workflows?status=failed", follow_redirects=False)
    assert bounced.status_code == 303
    assert bounced.headers["location"] == "/ui/sign-in?next=%2Fui%2Fworkflows%3Fstatus%3Dfailed"

    form = anonymous.get("/ui/sign-in")
    wrong = anonymous.post("/ui/sign-in", data={"token": "lib_nope", "csrf": csrf_of(form.text)})
    assert wrong.status_code == 401 and "not valid" in wrong.text and "Traceback" not in wrong.text

    alice = site.browser("alice")
    assert alice.get("/ui/workflows").status_code == 200
    cookie = alice.cookies.get("librarian_session")
    assert cookie == site.tokens["alice"]
    # The REST API takes bearer tokens only: a browser's cookie (sent by any site's form) opens nothing.
    assert alice.get("/workflows").status_code == 401

    # Signing in never redirects to another site.
    page = anonymous.get("/ui/sign-in")
    away = anonymous.post(
        "/ui/sign-in",
        data={"token": site.tokens["alice"], "next": "https://evil.example/x", "csrf": csrf_of(page.text)},
        follow_redirects=False,
    )
    assert away.headers["location"] == "/ui/search"

    out = alice.post(
        "/ui/sign-out", data={"csrf": csrf_of(alice.get("/ui/search").text)}, follow_redirects=False
    )
    assert out.status_code == 303 and alice.get("/ui/search", follow_redirects=False).status_code == 303


def test_forms_need_this_sites_csrf_token(site: Site) -> None:
    alice = site.browser("alice")
    token = csrf_of(alice.get("/ui/workflows").text)

    missing = alice.post("/ui/workflows", data={"workflow": HELLO})
    forged = alice.post("/ui/workflows", data={"workflow": HELLO, "csrf": "guessed" * 6})
    cross_site = alice.post(
        "/ui/workflows", data={"workflow": HELLO, "csrf": token}, headers={"Origin": "https://evil.example"}
    )
    fine = alice.post("/ui/workflows", data={"workflow": HELLO, "csrf": token}, follow_redirects=False)

    for refused in (missing, forged, cross_site):
        assert refused.status_code == 403, refused.text
    assert "security token" in missing.text and "another site" in cross_site.text
    assert fine.status_code == 303 and fine.headers["location"].startswith("/ui/workflows/")


def test_html_in_documents_is_shown_as_text(site: Site) -> None:
    alice = site.browser("alice")
    found = alice.get("/ui/search", params={"q": "payroll signing key", "scope": "knowledge"})

    assert "Acme payroll &lt;b&gt;runbook&lt;/b&gt;" in found.text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in found.text
    assert "<script>alert" not in found.text and "<b>runbook" not in found.text
    link = re.search(r'href="(/ui/page\?document_id=\d+)"', found.text)
    assert link is not None
    page = alice.get(link.group(1).replace("&amp;", "&"))
    assert page.status_code == 200 and "<script>alert" not in page.text and "&lt;script&gt;" in page.text


def test_another_organisation_sees_none_of_it(site: Site) -> None:
    alice, eve = site.browser("alice"), site.browser("eve")
    submitted = alice.post(
        "/ui/workflows",
        data={"workflow": HELLO, "csrf": csrf_of(alice.get("/ui/workflows").text)},
        follow_redirects=False,
    )
    workflow_page = submitted.headers["location"]

    searched = eve.get("/ui/search", params={"q": "payroll signing key"})
    listed = eve.get("/ui/workflows")
    opened = eve.get(workflow_page)
    live = eve.get(workflow_page + "/live")
    cancel = eve.post(workflow_page + "/cancel", data={"csrf": csrf_of(listed.text)})

    # Past the search box, which echoes the query.
    results = searched.text.split('action="/ui/search"', 1)[1].split("</form>", 1)[1]
    assert "payroll" not in results.lower() and "No knowledge document matches." in results
    assert workflow_page.rsplit("/", 1)[1] not in listed.text
    assert opened.status_code == live.status_code == cancel.status_code == 404
    assert "no workflow" in opened.text


def test_bad_workflow_and_source_forms_say_what_is_wrong(site: Site) -> None:
    alice = site.browser("alice")
    token = csrf_of(alice.get("/ui/workflows").text)
    unknown = "name: x\ntasks:\n  - id: build\n    executor_type: teleport\n    payload: {}\n"

    empty = alice.post("/ui/workflows", data={"workflow": " ", "csrf": token})
    invalid = alice.post("/ui/workflows", data={"workflow": unknown, "csrf": token})
    outside = alice.post("/ui/sources", data={"uri": "/etc", "csrf": token})
    version_only = alice.post(
        "/ui/sources", data={"uri": str(site.docs), "sdk_version": "1.0", "csrf": token}
    )

    assert empty.status_code == 422 and "paste a workflow" in empty.text
    assert invalid.status_code == 422 and "&#39;build&#39;" in invalid.text and "teleport" in invalid.text
    assert "teleport" in invalid.text.split("<textarea", 1)[1]  # the text comes back to be fixed
    assert outside.status_code in (403, 422) and "/etc" in outside.text
    assert version_only.status_code == 422 and "SDK name" in version_only.text
    for answer in (empty, invalid, outside, version_only):
        assert "Traceback" not in answer.text


def test_a_workflow_page_draws_its_dag_and_a_source_can_be_added_and_refreshed(site: Site) -> None:
    alice = site.browser("alice")
    token = csrf_of(alice.get("/ui/sources").text)
    added = alice.post("/ui/sources", data={"uri": str(site.docs), "csrf": token}, follow_redirects=False)
    assert added.status_code == 303
    jobs = alice.get("/ui/sources/jobs")
    assert "data-job" in jobs.text

    two = "name: two\ntasks:\n  - {id: a, executor_type: command_executor, payload: {argv: [echo, a]}}\n"
    two += "  - {id: b, executor_type: command_executor, payload: {argv: [echo, b]}, depends_on: [a]}\n"
    location = alice.post("/ui/workflows", data={"workflow": two, "csrf": token}, follow_redirects=False)
    page = alice.get(location.headers["location"])
    assert page.status_code == 200
    assert page.text.count('<g class="node') == 2 and page.text.count('class="edge') == 1
    follow = alice.get(location.headers["location"] + "/follow")
    assert follow.headers["content-type"].startswith("text/event-stream") and "event: end" in follow.text


def test_a_runbook_page_draws_its_steps_and_runs_them_one_by_one(site: Site) -> None:
    alice, eve = site.browser("alice"), site.browser("eve")
    token = csrf_of(alice.get("/ui/runbooks").text)
    added = site.lib.runbooks.add(site.lib.identity.authenticate(site.tokens["alice"]), RunbookInput(TRIAGE))
    page = alice.get(f"/ui/runbooks/{added['id']}")
    assert page.status_code == 200 and page.text.count('class="flowstep') == 5
    assert "if true → 4 · if false → 5" in page.text
    assert eve.get(f"/ui/runbooks/{added['id']}").status_code == 404  # another organisation

    bad = alice.post(f"/ui/runbooks/{added['id']}/executions", data={"variables": "oops", "csrf": token})
    assert bad.status_code == 422 and "variables, line 1" in bad.text
    started = alice.post(
        f"/ui/runbooks/{added['id']}/executions",
        data={"variables": "service=checkout", "problem": "slow", "csrf": token},
        follow_redirects=False,
    )
    execution = started.headers["location"]
    alice.post(execution + "/step", data={"csrf": token})
    waiting = alice.post(execution + "/step", data={"csrf": token})
    assert "Your answer" in waiting.text and "The p99 of checkout is 950 ms" in waiting.text
    alice.post(execution + "/step", data={"answer": "verdict: slow", "csrf": token})
    done = alice.get(execution)
    while 'id="execution-status">completed' not in done.text:
        done = alice.post(execution + "/step", data={"csrf": token})
        assert done.status_code == 200 and done.text.count("<li") < 40
    assert "scaling checkout" in done.text
    assert eve.get(execution).status_code == 404
    assert (
        eve.post(execution + "/step", data={"csrf": csrf_of(eve.get("/ui/runbooks").text)}).status_code == 404
    )


def test_incidents_show_their_similar_ones_and_take_a_verdict(site: Site) -> None:
    alice, eve = site.browser("alice"), site.browser("eve")
    me = site.lib.identity.authenticate(site.tokens["alice"])
    disk = "Disk full on db-1: No space left on device, writes failing"
    first = site.lib.incidents.create(
        me, IncidentDraft(title="db-1 disk full", description=disk, severity="high")
    )
    second = site.lib.incidents.create(
        me,
        IncidentDraft(
            title="db-2 disk full", description=disk.replace("db-1", "db-2"), solution_applied="rotate logs"
        ),
    )
    listed = alice.get("/ui/incidents")
    similar = alice.get("/ui/incidents", params={"q": "no space left on device on the database"})
    page = alice.get(f"/ui/incidents/{first['id']}")
    assert "db-1 disk full" in listed.text and "db-2 disk full" in similar.text
    assert f'data-incident="{second["id"]}"' in page.text and "rotate logs" in page.text

    token = csrf_of(page.text)
    marked = alice.post(
        f"/ui/incidents/{first['id']}/similar/{second['id']}", data={"verdict": "not_similar", "csrf": token}
    )
    assert marked.status_code == 200 and f'data-incident="{second["id"]}"' not in marked.text
    assert eve.get(f"/ui/incidents/{first['id']}").status_code == 404


def test_an_administrator_approves_a_quarantined_tool_in_the_page(site: Site) -> None:
    alice, root = site.browser("alice"), site.browser("root")
    me = site.lib.identity.authenticate(site.tokens["alice"])
    # A tool on a network service: active at once; its author sends it back to review.
    tool = site.lib.discovery.register_tool(
        {
            "name": "lint",
            "type": "mcp",
            "description": "Lint Python files",
            "binding": {"url": "https://mcp.example.org/mcp", "tool": "lint"},
        },
        principal=me,
    )
    tool = site.lib.discovery.set_status(tool["toolId"], "quarantined", principal=me)
    assert tool["status"] == "quarantined"

    waiting = root.get("/ui/tools", params={"status": "quarantined"})
    assert f'data-tool="{tool["toolId"]}"' in waiting.text and "Approve" in waiting.text
    assert "Approve" not in alice.get("/ui/tools", params={"status": "quarantined"}).text  # not an admin
    own = csrf_of(alice.get("/ui/tools").text)  # alice's own page: the refusal is about the role
    refused = alice.post(f"/ui/tools/{tool['id']}/status", data={"status": "active", "csrf": own})
    assert refused.status_code == 403 and "admin" in refused.text
    approved = root.post(
        f"/ui/tools/{tool['id']}/status", data={"status": "active", "csrf": csrf_of(waiting.text)}
    )
    assert approved.status_code == 200, approved.text[-1500:]
    assert f'data-tool="{tool["toolId"]}"' in approved.text
    found = alice.get("/ui/tools", params={"q": "lint my python code"})
    assert "lint" in found.text and "Lint Python files" in found.text


def test_the_local_administrator_reads_a_verified_fix_and_retires_it_in_the_page(site: Site) -> None:
    with site.lib.sessions.begin() as session:
        fix = VerifiedFix(
            signature="0" * 64,
            tool="git",
            tool_version="2.39.5",
            normalized_error="error: unknown option `set-upstream'",
            intent="track the remote branch",
            template_key="pages-test",
            failed_template=["git", "branch", "--set-upstream", "{0}"],
            fixed_template=["git", "branch", "--set-upstream-to", "{0}"],
            strategy="synopsis_rewrite",
            rationale="git 2.39 documents --set-upstream-to",
            snippets=[
                {"entity_name": "branch", "source_url": "cli://git/branch", "excerpt": "--set-upstream-to"}
            ],
            successes=3,
            failures=1,
        )
        session.add(fix)
        session.flush()
        fix_id = fix.id
    local, root = site.browser("local"), site.browser("root")

    listed = local.get("/ui/fixes", params={"tool": "git"})
    assert (
        f'data-fix="{fix_id}"' in listed.text
        and "--set-upstream-to" in listed.text
        and "3 of 4" in listed.text
    )
    refused = root.get("/ui/fixes")  # acme's administrator: not the runtime's organisation
    assert refused.status_code == 403 and "local organisation only" in refused.text
    assert root.get(f"/ui/fixes/{fix_id}").status_code == 403

    page = local.get(f"/ui/fixes/{fix_id}")
    assert "cli://git/branch" in page.text and "Retire this fix" in page.text
    token = csrf_of(page.text)
    assert local.post(f"/ui/fixes/{fix_id}/retire", data={"reason": "wrong"}).status_code == 403  # no CSRF
    unexplained = local.post(f"/ui/fixes/{fix_id}/retire", data={"reason": " ", "csrf": token})
    assert unexplained.status_code == 422 and "say why the fix is wrong" in unexplained.text

    retired = local.post(
        f"/ui/fixes/{fix_id}/retire", data={"reason": "points at the wrong remote", "csrf": token}
    )
    assert retired.status_code == 200 and "points at the wrong remote" in retired.text
    assert "Retire this fix" not in retired.text
    assert f'data-fix="{fix_id}"' not in local.get("/ui/fixes", params={"tool": "git"}).text
    assert f'data-fix="{fix_id}"' in local.get("/ui/fixes", params={"tool": "git", "retired": "true"}).text
