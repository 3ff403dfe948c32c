"""The web UI in a real browser: Debian's Chromium, driven by Playwright, against a real
``librarian serve`` subprocess holding real data (the AWS CLI's help for the seed's commands, a folder
of Markdown, a runbook).

An agent's everyday path, as a person sees it: search and open a result, research a failed command,
submit the seed's workflow and watch the loop correct it live, answer the loop's question, add a
source and watch its job. A screenshot of every page is saved under ``$LIBRARIAN_ARTIFACTS``
(default ``.artifacts``) as a test artifact.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from librarian.demo.s3 import S3Server, object_tags
from librarian.demo.scenario import BUCKET, KEY, demo_spec
from tests.correction.test_loop import AWS_SCOPES
from tests.mcp.test_mcp_runbooks import TRIAGE
from tests.skipping import unavailable
from tests.workflow_samples import LEAVES

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("LIBRARIAN_ARTIFACTS", ".artifacts")) / "screenshots"
BIN = Path(sys.executable).parent
SCRIPTED = """# Release checklist

Tag the release <script>window.pwned = 1</script> and publish the wheel.

<img src="x" onerror="window.pwned = 2">
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        unavailable("Chromium is missing (apt-get install chromium; scripts/test.sh installs it)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with S3Server(tmp_path_factory.mktemp("s3")) as server:
        yield server.endpoint


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``librarian serve`` on a copy of the AWS CLI home, with a folder of Markdown it may ingest."""
    root = tmp_path_factory.mktemp("ui-server")
    home = root / "home"
    docs = root / "docs"
    docs.mkdir()
    (docs / "release.md").write_text(SCRIPTED, encoding="utf-8")
    (docs / "queue.md").write_text("# Queue\n\nThe ingest queue retries a failed upload three times.\n")
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    for name in [key for key in env if key.startswith("LIBRARIAN_")]:
        env.pop(name)
    log = (root / "server.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "librarian.cli.main",
            "--home",
            str(home),
            "serve",
            "--port",
            str(port),
            "--allow-path",
            str(docs),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            pytest.fail(f"librarian serve did not start: {(root / 'server.log').read_text()[-2000:]}")
        # The AWS CLI's help for the commands the seed workflow meets, and the folder of Markdown,
        # ingested through the API the Sources page uses.
        for body in (
            {"uri": "aws", "kind": "cli", "sdk_name": "aws-cli", "scopes": list(AWS_SCOPES)},
            {"uri": str(docs)},
        ):
            job = httpx.post(f"{url}/sources", json=body, timeout=30).json()["job_id"]
            done = httpx.get(f"{url}/jobs/{job}", timeout=30).json()
            while done["status"] in ("queued", "running"):
                time.sleep(0.3)
                done = httpx.get(f"{url}/jobs/{job}", timeout=30).json()
            assert done["status"] == "succeeded", done
        added = httpx.post(f"{url}/runbooks", json={"text": TRIAGE}, timeout=60)
        assert added.status_code == 201, added.text
        yield url
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    context = browser.new_context(base_url=server, viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()


def shoot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_search_and_open_a_result(page: Page) -> None:
    page.goto("/")
    assert page.url.endswith("/ui/search")
    page.fill("input[name=q]", "upload a file to s3 with tags")
    page.click("form.search button[type=submit]")
    page.wait_for_selector("article.hit")
    assert page.locator("article.hit mark").count() > 0
    shoot(page, "search")
    first = page.locator("article.hit h3 a").first
    title = first.inner_text()
    first.click()
    page.wait_for_selector("pre.document")
    assert page.locator("h1").inner_text() and title
    assert len(page.locator("pre.document").inner_text()) > 200
    shoot(page, "page")


def test_a_script_in_a_document_never_runs(page: Page) -> None:
    page.goto("/ui/search?q=release+checklist+wheel")
    page.wait_for_selector("article.hit")
    assert "<script>window.pwned = 1</script>" in page.locator("main").inner_text()
    page.locator("article.hit h3 a", has_text="Release checklist").first.click()
    page.wait_for_selector("pre.document")
    assert "onerror" in page.locator("pre.document").inner_text()
    assert page.evaluate("typeof window.pwned") == "undefined"


def test_research_a_failed_command(page: Page) -> None:
    page.goto("/ui/research")
    page.fill("input[name=sdk]", "aws")
    page.fill("input[name=q]", "upload a file with tags")
    page.fill("textarea[name=error_text]", "Unknown options: --tagging, compliance=strict")
    page.click("form.stack button[type=submit]")
    page.wait_for_selector(".answer .confidence")
    assert float(page.locator(".answer .confidence").inner_text()) > 0
    assert "put-object" in page.locator(".answer").inner_text()
    shoot(page, "research")


def test_the_seed_workflow_is_corrected_live(page: Page, s3: str) -> None:
    page.goto("/ui/workflows")
    page.fill("textarea[name=workflow]", json.dumps(demo_spec(s3).to_dict(), indent=2))
    page.click("form.stack button[type=submit]")
    page.wait_for_url("**/ui/workflows/*")
    page.evaluate("window.__stayed = true")
    # No reload: the page follows the workflow over server-sent events and redraws itself.
    page.wait_for_function(
        "document.getElementById('workflow-status').textContent.trim() === 'success'", timeout=240_000
    )
    assert page.evaluate("window.__stayed === true")
    timeline = page.locator("ol.timeline").inner_text()
    assert "correction" in timeline and "research" in timeline
    assert page.locator("svg.dag g.node").count() >= 4
    # The DAG as submitted is drawn beside it: the submitted tasks, the corrected one with the
    # command it was submitted with.
    submitted = len(demo_spec(s3).to_dict()["tasks"])
    assert page.locator("svg.dag-before g.node").count() == submitted
    assert page.locator("svg.dag-before g.node.corrected").count() >= 1
    page.click("details.before summary")
    assert "was submitted as" in page.locator("details.before").inner_text()
    shoot(page, "workflow-before")
    assert object_tags(s3, BUCKET, KEY) == [{"Key": "compliance", "Value": "strict"}]
    shoot(page, "workflow")


def test_the_loops_question_is_answered_in_the_page(page: Page) -> None:
    page.goto("/ui/workflows")
    page.fill("textarea[name=workflow]", json.dumps(LEAVES))
    page.click("form.stack button[type=submit]")
    page.wait_for_selector("section.question", timeout=180_000)
    assert "--not-required" in page.locator("section.question").inner_text()
    shoot(page, "question")
    page.fill("section.question input[name=answer]", "pip list --not-required")
    page.click("section.question button[type=submit]")
    page.wait_for_function(
        "document.getElementById('workflow-status').textContent.trim() === 'success'", timeout=180_000
    )
    assert "pip list --not-required" in page.locator("table.tasks").inner_text()
    page.goto("/ui/workflows")
    assert page.locator("table.list tbody tr").count() >= 2
    shoot(page, "workflows")


def test_the_fixes_the_loop_learned_are_listed_and_one_is_retired(page: Page) -> None:
    # Runs after the two workflow tests above (pytest keeps a module's order): the loop learned a
    # verified fix from each, the seed's research fix and the answered question's.
    page.goto("/ui/search")
    page.click("nav >> text=Fixes")
    page.wait_for_url("**/ui/fixes")
    rows = page.locator("table.fixes tbody tr[data-fix]")
    assert rows.count() >= 1
    listed = page.locator("table.fixes").inner_text()
    assert "no such option --not-required" in listed and "--tagging" in listed  # both fixes
    shoot(page, "fixes")
    page.locator("table.fixes tbody tr[data-fix] a", has_text="pip").first.click()
    page.wait_for_url("**/ui/fixes/*")
    page.fill("input[name=reason]", "the option moved again")
    page.click("text=Retire this fix")
    page.wait_for_selector("p.notice")
    assert "the option moved again" in page.locator("p.notice").inner_text()
    page.goto("/ui/fixes")
    assert "no such option --not-required" not in page.locator("table.fixes").inner_text()


def test_sources_show_their_runs_and_a_refresh_runs_live(page: Page) -> None:
    page.goto("/ui/sources")
    rows = page.locator("table.sources tbody tr")
    assert rows.count() >= 2 and "release.md" not in rows.first.inner_text()
    page.locator("table.sources form button", has_text="Refresh").last.click()
    page.wait_for_selector("#jobs tr[data-job]")
    page.wait_for_function("!document.querySelector('#jobs .s-running, #jobs .s-queued')", timeout=120_000)
    assert page.locator("#jobs .s-succeeded").count() >= 1
    # A bad form is a clear message, not a traceback.
    page.fill("input[name=uri]", "/etc")
    page.locator("form.stack button[type=submit]").click()
    page.wait_for_selector("p.error")
    assert "Traceback" not in page.content()
    shoot(page, "sources")


def test_a_runbook_runs_step_by_step_with_its_question_answered_in_the_page(page: Page) -> None:
    page.goto("/ui/runbooks")
    page.fill("input[name=q]", "checkout is slow, p99 latency doubled")
    page.click("form.search button[type=submit]")
    page.locator("table.list a", has_text="Checkout latency triage").click()
    assert page.locator("li.flowstep").count() == 5
    shoot(page, "runbook")
    page.fill("input[name=problem]", "slow checkout")
    page.locator("form.stack button[type=submit]", has_text="Start").click()
    page.wait_for_url("**/ui/runbook-executions/*")
    page.locator("section.question button", has_text="Run the next step").click()
    page.wait_for_selector("text=p99 checkout 950ms")
    page.locator("section.question button", has_text="Run the next step").click()
    page.wait_for_selector("section.question textarea[name=answer]")
    assert "The p99 of checkout is 950 ms" in page.locator("section.question").inner_text()
    shoot(page, "runbook-execution")
    page.fill("section.question textarea[name=answer]", "verdict: slow, three times the budget")
    page.locator("section.question button[type=submit]").click()
    for _ in range(5):
        if page.locator("#execution-status").inner_text() == "completed":
            break
        page.locator("section.question button", has_text="Run the next step").click()
    assert page.locator("#execution-status").inner_text() == "completed"
    assert "scaling checkout" in page.locator("ol.flow").inner_text()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
