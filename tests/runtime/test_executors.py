"""The built-in executors against real processes, real files and a real local HTTP server."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from librarian.config import Settings
from librarian.errors import ConflictError, InvalidInputError
from librarian.runtime.contracts import ExecutionResult, TaskSpec, Workspace
from librarian.runtime.executors import (
    ApiCaller,
    CodeExecutor,
    CommandExecutor,
    ExecutorRegistry,
    FileWriter,
    build_registry,
)
from librarian.runtime.sandbox import EnvironmentManager, SandboxLimits
from tests.venvs import add_distribution, add_script, make_venv


@pytest.fixture
def environment(tmp_path: Path) -> EnvironmentManager:
    return EnvironmentManager(
        tmp_path / "workspaces",
        limits=SandboxLimits(timeout_seconds=30, memory_mb=1024, output_bytes=100_000),
    )


@pytest.fixture
def workspace(environment: EnvironmentManager) -> Workspace:
    return environment.workspace_for("wf-exec")


def _task(executor_type: str, **payload: Any) -> TaskSpec:
    return TaskSpec(task_id="t1", workflow_id="wf-exec", executor_type=executor_type, payload=payload)


def _roundtrips(result: ExecutionResult) -> ExecutionResult:
    """Results cross the broker as JSON: everything in them must survive that."""
    copy = ExecutionResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert copy == result
    return result


# --- command_executor ---------------------------------------------------------------------------


def test_command_success_feedback(environment: EnvironmentManager, workspace: Workspace) -> None:
    result = _roundtrips(
        CommandExecutor(environment).execute(_task("command_executor", argv=["echo", "hi"]), workspace)
    )
    assert result.ok
    assert set(result.feedback) == {"status", "notes", "stdout", "stderr"}
    assert result.feedback["status"] == "success"
    assert result.feedback["stdout"] == "hi\n"
    assert "`echo hi` exited with code 0" in result.feedback["notes"]
    assert result.output["exit_code"] == 0


def test_command_failure_carries_exit_code_and_stderr(
    environment: EnvironmentManager, workspace: Workspace
) -> None:
    task = _task(
        "command_executor", argv=["/bin/sh", "-c", "echo partial; echo 'no such bucket' >&2; exit 255"]
    )
    result = _roundtrips(CommandExecutor(environment).execute(task, workspace))
    assert not result.ok
    feedback = result.feedback
    assert set(feedback) == {"status", "error_type", "error_message", "traceback", "details"}
    assert feedback["status"] == "failed"
    assert feedback["error_type"] == "CommandFailedError"
    assert "exited with code 255" in feedback["error_message"]
    assert "no such bucket" in feedback["error_message"]
    assert feedback["details"]["exit_code"] == 255
    assert feedback["details"]["stderr"] == "no such bucket\n"
    assert feedback["details"]["stdout"] == "partial\n"


def test_an_expected_nonzero_exit_code_is_success(
    environment: EnvironmentManager, workspace: Workspace
) -> None:
    task = _task("command_executor", argv=["grep", "-q", "absent", "/dev/null"], expect={"exit_code": 1})
    assert CommandExecutor(environment).execute(task, workspace).ok


def test_a_script_runs_only_when_the_payload_asks_for_one(
    environment: EnvironmentManager, workspace: Workspace
) -> None:
    executor = CommandExecutor(environment)
    script = executor.execute(_task("command_executor", script="echo $((1 + 2)) > out; cat out"), workspace)
    assert script.ok and script.feedback["stdout"] == "3\n"
    literal = executor.execute(_task("command_executor", argv=["echo", "$((1 + 2))", "; rm out"]), workspace)
    assert literal.feedback["stdout"] == "$((1 + 2)) ; rm out\n"
    assert (workspace.root / "out").exists()


def test_argv_and_script_together_are_refused(environment: EnvironmentManager, workspace: Workspace) -> None:
    task = _task("command_executor", argv=["ls"], script="ls")
    result = CommandExecutor(environment).execute(task, workspace)
    assert not result.ok
    assert result.feedback["error_type"] == "PayloadError"
    assert "exactly one of 'argv'" in result.feedback["error_message"]
    assert "'t1'" in result.feedback["error_message"]


def test_payload_env_reaches_the_command_but_worker_secrets_do_not(
    environment: EnvironmentManager, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "worker-secret-value")
    task = _task("command_executor", argv=["env"], env={"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"})
    result = CommandExecutor(environment).execute(task, workspace)
    assert "AWS_ENDPOINT_URL=http://127.0.0.1:5000" in result.feedback["stdout"]
    assert "worker-secret-value" not in result.feedback["stdout"]
    assert "AWS_SECRET_ACCESS_KEY" not in result.feedback["stdout"]


def test_payload_timeout_kills_the_command(environment: EnvironmentManager, workspace: Workspace) -> None:
    result = CommandExecutor(environment).execute(
        _task("command_executor", argv=["sleep", "30"], timeout_seconds=0.5), workspace
    )
    assert not result.ok
    assert result.feedback["error_type"] == "TimeoutError"
    assert result.feedback["details"]["timed_out"] is True
    assert result.duration_seconds < 10


def test_payload_cannot_raise_the_memory_limit(environment: EnvironmentManager, workspace: Workspace) -> None:
    task = _task("command_executor", argv=["cat", "/proc/self/limits"], memory_mb=1_000_000)
    stdout = CommandExecutor(environment).execute(task, workspace).feedback["stdout"]
    line = next(line for line in stdout.splitlines() if line.startswith("Max data size"))
    assert str(1024 * 1024 * 1024) in line  # the operator's 1024 MiB, not the payload's


def test_a_missing_command_is_a_task_failure(environment: EnvironmentManager, workspace: Workspace) -> None:
    result = CommandExecutor(environment).execute(
        _task("command_executor", argv=["no-such-tool-xyz"]), workspace
    )
    assert not result.ok
    assert result.feedback["error_type"] == "CommandNotFoundError"
    assert "no-such-tool-xyz" in result.feedback["error_message"]


# --- code_executor ------------------------------------------------------------------------------


def test_code_runs_in_the_sandbox(
    environment: EnvironmentManager, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBRARIAN_SECRET", "nope")
    code = "import os, sys\nprint(os.getcwd(), sys.argv[1:], 'LIBRARIAN_SECRET' in os.environ)"
    result = CodeExecutor(environment).execute(_task("code_executor", code=code, args=["a b"]), workspace)
    assert result.ok, result.feedback
    assert result.feedback["stdout"].strip() == f"{workspace.root} ['a b'] False"
    assert list((workspace.root / ".librarian" / "code").iterdir()) == []  # the script is removed


def test_code_exception_gives_its_traceback(environment: EnvironmentManager, workspace: Workspace) -> None:
    code = "def parse(text):\n    return int(text)\n\nparse('twelve')\n"
    result = _roundtrips(CodeExecutor(environment).execute(_task("code_executor", code=code), workspace))
    assert not result.ok
    feedback = result.feedback
    assert feedback["error_type"] == "ValueError"
    assert feedback["error_message"] == "invalid literal for int() with base 10: 'twelve'"
    assert feedback["traceback"].startswith("Traceback (most recent call last):")
    assert "line 2, in parse" in feedback["traceback"]
    assert feedback["details"]["exit_code"] == 1


def test_code_without_code_is_a_payload_failure(
    environment: EnvironmentManager, workspace: Workspace
) -> None:
    result = CodeExecutor(environment).execute(_task("code_executor", source="print(1)"), workspace)
    assert result.feedback["error_type"] == "PayloadError"
    assert "'code' is required" in result.feedback["error_message"]


# --- file_writer --------------------------------------------------------------------------------


def test_file_writer_writes_inside_the_workspace(workspace: Workspace) -> None:
    result = _roundtrips(
        FileWriter().execute(_task("file_writer", path="notes/plan.md", content="# Plan\n"), workspace)
    )
    assert result.ok
    target = workspace.root / "notes" / "plan.md"
    assert target.read_text() == "# Plan\n"
    assert result.output["absolute_path"] == str(target.resolve())
    assert result.output["sha256"] == hashlib.sha256(b"# Plan\n").hexdigest()
    assert result.output["bytes"] == 7
    assert [p.name for p in target.parent.iterdir()] == ["plan.md"]  # no temporary file left


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../x", "'..' could leave the workspace"),
        ("/etc/x", "absolute path '/etc/x' is refused"),
        ("a/../../x", "'..'"),
        ("~/x", "absolute path"),
        ("", "does not name a file"),
    ],
)
def test_file_writer_refuses_paths_leaving_the_workspace(
    workspace: Workspace, tmp_path: Path, path: str, reason: str
) -> None:
    result = FileWriter().execute(_task("file_writer", path=path, content="pwned"), workspace)
    assert not result.ok
    assert result.feedback["error_type"] == "PathRefusedError"
    assert reason in result.feedback["error_message"]
    assert result.feedback["details"] == {"operation": "write", "path": path}
    assert not (workspace.root.parent / "x").exists()
    assert not Path("/etc/x").exists()


def test_file_writer_refuses_a_symlink_out_of_the_workspace(workspace: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace.root / "link").symlink_to(outside)
    result = FileWriter().execute(_task("file_writer", path="link/x.txt", content="pwned"), workspace)
    assert not result.ok
    assert result.feedback["error_type"] == "PathRefusedError"
    assert "symbolic link" in result.feedback["error_message"]
    assert list(outside.iterdir()) == []


def test_file_writer_follows_a_symlink_that_stays_inside(workspace: Workspace) -> None:
    (workspace.root / "real").mkdir()
    (workspace.root / "alias").symlink_to(workspace.root / "real")
    result = FileWriter().execute(_task("file_writer", path="alias/x.txt", content="ok"), workspace)
    assert result.ok
    assert (workspace.root / "real" / "x.txt").read_text() == "ok"


def test_file_writer_reports_an_os_error_with_details(workspace: Workspace) -> None:
    (workspace.root / "dir").mkdir()
    result = FileWriter().execute(_task("file_writer", path="dir", content="x"), workspace)
    assert not result.ok
    assert result.feedback["error_type"] == "IsADirectoryError"
    assert result.feedback["details"]["operation"] == "write"
    assert result.feedback["details"]["path"] == "dir"


# --- api_caller ---------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/items":
            self._answer(200, {"name": "librarian", "items": [{"id": 1}, {"id": 2}]})
        else:
            self._answer(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(201, {"received": json.loads(body), "auth": self.headers.get("Authorization")})

    def _answer(self, status: int, document: object) -> None:
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_api_call_to_an_allow_listed_loopback(server: str, workspace: Workspace) -> None:
    caller = ApiCaller(allowed_hosts=["127.0.0.1"])
    result = _roundtrips(caller.execute(_task("api_caller", url=f"{server}/items"), workspace))
    assert result.ok, result.feedback
    assert result.output["status_code"] == 200
    assert result.output["json"] == {"name": "librarian", "items": [{"id": 1}, {"id": 2}]}
    assert result.feedback["status"] == "success"


def test_api_call_posts_json_with_headers(server: str, workspace: Workspace) -> None:
    caller = ApiCaller(allowed_hosts=["127.0.0.0/8"])
    task = _task(
        "api_caller",
        method="post",
        url=f"{server}/things",
        json={"a": [1, 2]},
        headers={"Authorization": "Bearer from-payload"},
    )
    result = caller.execute(task, workspace)
    assert result.ok
    assert result.output["json"] == {"received": {"a": [1, 2]}, "auth": "Bearer from-payload"}
    assert "Bearer from-payload" not in result.feedback["notes"]


def test_loopback_is_refused_unless_allow_listed(server: str, workspace: Workspace) -> None:
    for caller in (ApiCaller(), ApiCaller(allowed_hosts=["10.0.0.0/8", "example.internal"])):
        result = caller.execute(_task("api_caller", url=f"{server}/items"), workspace)
        assert not result.ok
        assert result.feedback["error_type"] == "AddressRefusedError"
        assert "loopback" in result.feedback["error_message"]
        assert "allowed_private_hosts" in result.feedback["error_message"]


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/meta-data", "http://10.1.2.3/", "http://[::1]:9/"]
)
def test_private_and_link_local_addresses_are_refused(workspace: Workspace, url: str) -> None:
    result = ApiCaller(allowed_hosts=["127.0.0.1"]).execute(_task("api_caller", url=url), workspace)
    assert result.feedback["error_type"] == "AddressRefusedError"


def test_api_status_outside_2xx_is_a_failure_with_details(server: str, workspace: Workspace) -> None:
    caller = ApiCaller(allowed_hosts=["127.0.0.1"])
    result = caller.execute(_task("api_caller", url=f"{server}/nothing"), workspace)
    assert not result.ok
    assert result.feedback["error_type"] == "HTTPStatusError"
    assert result.feedback["details"]["status_code"] == 404
    assert "no route /nothing" in result.feedback["error_message"]
    expected = caller.execute(_task("api_caller", url=f"{server}/nothing", expect={"status": 404}), workspace)
    assert expected.ok


def test_api_connection_failure_is_a_task_failure(workspace: Workspace) -> None:
    caller = ApiCaller(allowed_hosts=["127.0.0.1"], timeout_seconds=5)
    result = caller.execute(_task("api_caller", url="http://127.0.0.1:9/"), workspace)  # discard port: closed
    assert not result.ok
    assert result.feedback["error_type"] == "ConnectError"


def test_api_bad_urls_are_payload_failures(workspace: Workspace) -> None:
    for url in ("file:///etc/passwd", "not a url", "ftp://example.com/x"):
        result = ApiCaller().execute(_task("api_caller", url=url), workspace)
        assert result.feedback["error_type"] == "PayloadError", url


# --- registry -----------------------------------------------------------------------------------


class _Echo:
    executor_type: str = "echo_executor"

    def execute(self, task: TaskSpec, workspace: Workspace) -> ExecutionResult:
        return ExecutionResult(ok=True, feedback={"status": "success", "notes": str(task.payload)})


def test_registry_has_the_built_ins_and_takes_new_types(tmp_path: Path) -> None:
    registry = build_registry(Settings(home=tmp_path, allowed_private_hosts=["127.0.0.1"]))
    assert registry.executor_types() == (
        "api_caller",
        "code_executor",
        "command_executor",
        "file_writer",
        "tool_call",
        "verb",
    )
    caller = registry.get_executor("api_caller")
    assert isinstance(caller, ApiCaller) and caller.allow.allows_address("127.0.0.1")
    registry.register_executor(_Echo())
    assert "echo_executor" in registry.executor_types()
    with pytest.raises(ConflictError, match="echo_executor"):
        registry.register_executor(_Echo())
    registry.register_executor(_Echo(), replace=True)


def test_an_unknown_executor_type_is_named_in_the_error() -> None:
    registry = ExecutorRegistry([FileWriter()])
    with pytest.raises(InvalidInputError, match="'quantum_executor'") as caught:
        registry.get_executor("quantum_executor")
    assert "file_writer" in str(caught.value)


def test_registry_refuses_a_badly_named_type() -> None:
    bad = _Echo()
    bad.executor_type = "Bad Type"
    with pytest.raises(InvalidInputError, match="Bad Type"):
        ExecutorRegistry([bad])


def test_registered_executors_run_through_the_registry(
    environment: EnvironmentManager, workspace: Workspace
) -> None:
    registry = ExecutorRegistry([CommandExecutor(environment), _Echo()])
    task = _task("command_executor", argv=["printf", "%s", os.sep])
    assert registry.get_executor(task.executor_type).execute(task, workspace).feedback["stdout"] == "/"


# --- the task's own environment: a virtualenv, a PATH, an interpreter ------------------------------


@pytest.fixture(scope="module")
def task_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real virtualenv holding ``mylib`` 2.0 and a ``mytool`` script: neither exists in the runtime."""
    venv = make_venv(tmp_path_factory.mktemp("venv") / "env")
    add_distribution(venv, "mylib", "2.0", {"mylib/__init__.py": "ANSWER = 42\n"})
    add_script(venv, "mytool", "import sys, mylib\nprint('mytool', sys.argv[1:], mylib.ANSWER)\n")
    return venv


def test_code_runs_in_the_virtualenv_the_task_names(
    environment: EnvironmentManager, workspace: Workspace, task_venv: Path
) -> None:
    code = "import sys, mylib\nprint(sys.prefix, mylib.ANSWER)"
    result = CodeExecutor(environment).execute(
        _task("code_executor", code=code, venv=str(task_venv)), workspace
    )
    assert result.ok, result.feedback
    assert result.feedback["stdout"].split() == [str(task_venv), "42"]


def test_code_runs_the_python_first_on_the_tasks_path(
    environment: EnvironmentManager, workspace: Workspace, task_venv: Path
) -> None:
    path = f"{task_venv / 'bin'}:/usr/bin:/bin"
    code = "import mylib\nprint(mylib.ANSWER)"
    result = CodeExecutor(environment).execute(
        _task("code_executor", code=code, env={"PATH": path}), workspace
    )
    assert result.ok, result.feedback
    assert result.feedback["stdout"].strip() == "42"
    # Without an environment of its own, a task runs the runtime's interpreter, which has no mylib.
    plain = CodeExecutor(environment).execute(_task("code_executor", code=code), workspace)
    assert plain.feedback["error_type"] == "ModuleNotFoundError"


def test_a_command_finds_the_tools_of_its_virtualenv(
    environment: EnvironmentManager, workspace: Workspace, task_venv: Path
) -> None:
    task = _task("command_executor", argv=["mytool", "x"], venv=str(task_venv))
    result = CommandExecutor(environment).execute(task, workspace)
    assert result.ok, result.feedback
    assert result.feedback["stdout"].strip() == "mytool ['x'] 42"


def test_a_missing_virtualenv_is_a_payload_failure_naming_the_field(
    environment: EnvironmentManager, workspace: Workspace, tmp_path: Path
) -> None:
    task = _task("code_executor", code="print(1)", venv=str(tmp_path / "nowhere"))
    result = CodeExecutor(environment).execute(task, workspace)
    assert result.feedback["error_type"] == "PayloadError"
    assert "'venv'" in result.feedback["error_message"] and "task 't1'" in result.feedback["error_message"]
