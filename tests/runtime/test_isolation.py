"""Tasks in namespaces: each reproduction of the hardening issue's sandbox section, with real processes.

Every test runs real programs under the real ``bwrap``; on a machine without it they fail (the test
command installs bubblewrap). The reproductions: a task read the runtime's environment through
``/proc``, read the configuration and database next to its workspace, left ``setsid`` children
running past its timeout, forked without bound, and reached internal services over the network.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from librarian.config import Settings
from librarian.errors import BackendUnavailableError
from librarian.runtime import isolation
from librarian.runtime.contracts import TaskSpec
from librarian.runtime.executors.command import CommandExecutor
from librarian.runtime.executors.file_writer import FileWriter
from librarian.runtime.forkserver import SERVER_INTERPRETER
from librarian.runtime.isolation import NamespaceSandbox
from librarian.runtime.sandbox import FORKSERVER_AVAILABLE, EnvironmentManager, SandboxLimits
from tests.processes import wait_for

LAUNCHERS = [
    "python",
    "prlimit",
    pytest.param("forkserver", marks=pytest.mark.skipif(not FORKSERVER_AVAILABLE, reason="no pidfd")),
]


def _settings(home: Path, **overrides: object) -> Settings:
    return Settings(home=home, runtime_task_timeout_seconds=30, runtime_task_processes=64, **overrides)  # type: ignore[arg-type]


@pytest.fixture(params=LAUNCHERS)
def isolated(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[EnvironmentManager]:
    """An isolated manager made from settings, as the runtime makes it, with each launcher."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('llm_api_key = "sk-secret-in-config"\n')
    (home / "librarian.db").write_bytes(b"SQLite format 3\x00secret rows")
    settings = _settings(home, runtime_sandbox_launcher=request.param)
    manager = EnvironmentManager.from_settings(settings)
    assert manager.isolation is not None
    yield manager
    manager.shutdown()


def _sh(
    manager: EnvironmentManager, script: str, workflow: str = "wf-1", **kwargs: object
) -> tuple[int, str, str]:
    outcome = manager.run(["sh", "-c", script], manager.workspace_for(workflow), **kwargs)  # type: ignore[arg-type]
    return outcome.exit_code, outcome.stdout, outcome.stderr


def test_a_task_cannot_read_the_runtime_environment_through_proc(isolated: EnvironmentManager) -> None:
    outside = subprocess.Popen(["sleep", "60"])  # a process of the machine, outside every sandbox
    try:
        _, readable, _ = _sh(isolated, f"test -e /proc/{os.getpid()}/environ && echo yes")
        # Its own processes only (and bwrap's init where the run built its own sandbox): none of the
        # machine's (the sleep, this test, the databases), nor a namespace server's.
        names = set(_sh(isolated, "cat /proc/[0-9]*/comm")[1].split())
    finally:
        outside.kill()
        outside.wait()
    assert readable == ""
    assert names <= {"bwrap", "sh", "cat"}, names


def test_a_task_sees_neither_the_data_directory_nor_other_workspaces(isolated: EnvironmentManager) -> None:
    isolated.workspace_for("wf-other")
    (isolated.root / "wf-other" / "their-output.txt").write_text("another team's data")
    _, out, err = _sh(
        isolated,
        "cat $HOME/../../config.toml; cat $HOME/../../librarian.db; ls $HOME/..;"
        " cat $HOME/../wf-other/their-output.txt; echo done",
    )
    assert out.strip().splitlines()[-1] == "done" and "wf-other" not in out
    assert "sk-secret" not in out and "secret rows" not in out and "another team" not in out
    assert "No such file" in err


def test_a_task_sees_a_read_only_system_and_its_tools(isolated: EnvironmentManager, tmp_path: Path) -> None:
    _, out, err = _sh(
        isolated, "touch /usr/x 2>&1 || echo refused; ls /root 2>&1 | head -1; echo ok > mine && cat mine"
    )
    assert "refused" in out and out.strip().endswith("ok"), (out, err)
    # The runtime's own interpreter (on the PATH) runs, its virtualenv and base installation included.
    outcome = isolated.run(
        [sys.executable, "-c", "import json, sqlite3; print('py ok')"], isolated.workspace_for("wf-1")
    )
    assert outcome.stdout.strip() == "py ok", outcome.stderr


def test_a_task_runs_as_an_unprivileged_user_without_capabilities(isolated: EnvironmentManager) -> None:
    _, out, _ = _sh(isolated, "id -u; grep CapEff /proc/self/status")
    uid, caps = out.split("\n")[0], out.split("\n")[1]
    assert uid != "0"
    assert caps.split()[-1] == "0000000000000000"
    if os.geteuid() == 0:
        assert int(uid) == isolated.isolation.user_for("wf-1")  # type: ignore[union-attr]


def test_setsid_children_die_with_the_task_at_its_timeout(isolated: EnvironmentManager) -> None:
    """The issue's reproduction: five setsid children wrote to F two minutes after the kill."""
    workspace = isolated.workspace_for("wf-1")
    executor = CommandExecutor(isolated)
    task = TaskSpec(
        task_id="escape",
        workflow_id="wf-1",
        executor_type="command_executor",
        payload={
            "script": "for i in 1 2 3 4 5; do setsid sh -c 'sleep 2; echo escaped >> F' & done; sleep 30",
            "timeout_seconds": 1,
        },
    )
    started = time.monotonic()
    result = executor.execute(task, workspace)
    assert not result.ok and "after its 1s timeout" in result.feedback["error_message"]
    assert time.monotonic() - started < 5
    time.sleep(3)
    assert not (workspace.root / "F").exists()


def test_a_fork_bomb_stops_at_the_process_limit(isolated: EnvironmentManager) -> None:
    code = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    for _ in range(1000):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(2); os._exit(0)\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print('stopped', n, exc.errno)\n"
    )
    outcome = isolated.run([sys.executable, "-c", code], isolated.workspace_for("wf-1"), timeout_seconds=20)
    words = outcome.stdout.split()
    assert words[0] == "stopped", (outcome.stdout, outcome.stderr)
    assert int(words[1]) < 64 and int(words[2]) == 11  # EAGAIN


def test_background_children_die_when_the_task_ends(isolated: EnvironmentManager) -> None:
    workspace = isolated.workspace_for("wf-1")
    code, out, _ = _sh(isolated, "setsid sh -c 'sleep 1; echo escaped >> F' & echo started")
    assert (code, out) == (0, "started\n")
    time.sleep(2)
    assert not (workspace.root / "F").exists()


def test_a_task_that_signals_itself_ends_by_that_signal(isolated: EnvironmentManager) -> None:
    # 128 + SIGTERM, as bwrap reports it: the program is never its PID namespace's shielded first process.
    assert _sh(isolated, "kill -TERM $$; echo survived")[:2] == (143, "")


def _host_processes_running(marker: str) -> list[int]:
    """The machine's processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue  # it ended meanwhile
    return found


def _descendants(pid: int) -> list[int]:
    """The machine's processes below ``pid``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    found: list[int] = []
    frontier = [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _namespace_manager(tmp_path: Path) -> EnvironmentManager:
    manager = EnvironmentManager.from_settings(
        _settings(tmp_path / "home", runtime_sandbox_launcher="forkserver")
    )
    assert manager.isolation is not None and manager.isolation.unshare is not None
    return manager


@pytest.mark.skipif(not FORKSERVER_AVAILABLE, reason="no pidfd")
def test_runs_of_a_workflow_share_its_namespace_server_and_other_workflows_get_their_own(
    tmp_path: Path,
) -> None:
    manager = _namespace_manager(tmp_path)
    try:
        servers = manager._forkservers
        assert servers is not None
        for _ in range(3):
            assert _sh(manager, "echo mine > a.txt", "wf-a")[0] == 0
        assert len(servers.server_pids()) == 1
        # Another workflow, while the first one's server lives: its own server, its own view.
        _, out, err = _sh(manager, "cat ../wf-a/a.txt; ls ..; id -u", "wf-b")
        assert "mine" not in out and "wf-a" not in out and "No such file" in err
        assert int(out.split()[-1]) == manager.isolation.user_for("wf-b")  # type: ignore[union-attr]
        assert len(servers.server_pids()) == 2
    finally:
        manager.shutdown()


@pytest.mark.skipif(not FORKSERVER_AVAILABLE, reason="no pidfd")
def test_a_workspace_deleted_and_made_again_gets_a_server_that_sees_the_new_one(tmp_path: Path) -> None:
    manager = _namespace_manager(tmp_path)
    try:
        assert _sh(manager, "echo first > a.txt")[0] == 0
        shutil.rmtree(manager.root / "wf-1")  # an operator cleans the workspaces up
        workspace = manager.workspace_for("wf-1")
        assert _sh(manager, "echo second > b.txt; ls")[:2] == (0, "b.txt\ntmp\n")
        assert (workspace.root / "b.txt").read_text() == "second\n"
    finally:
        manager.shutdown()


@pytest.mark.skipif(not FORKSERVER_AVAILABLE, reason="no pidfd")
def test_a_killed_namespace_server_takes_its_runs_with_it(tmp_path: Path) -> None:
    manager = _namespace_manager(tmp_path)
    workspace = manager.workspace_for("wf-1")
    try:
        outcome: list[int] = []
        marker = f"61.{time.time_ns() % 10**9:09d}"  # this run's sleep alone, whatever ran before
        runner = threading.Thread(
            target=lambda: outcome.append(manager.run(["sleep", marker], workspace).exit_code)
        )
        runner.start()
        assert wait_for(lambda: _host_processes_running(marker), 5.0)
        servers = manager._forkservers
        assert servers is not None
        [sandbox] = servers.server_pids()  # bwrap's, outside the sandbox
        # The server itself, inside: bwrap's descendant that runs the interpreter.
        interpreter = SERVER_INTERPRETER.name[:15]  # as the kernel names it
        [server] = [
            pid
            for pid in _descendants(sandbox)
            if Path(f"/proc/{pid}/comm").read_text().strip() == interpreter
        ]
        os.kill(server, signal.SIGKILL)
        runner.join(10)
        assert outcome == [-signal.SIGKILL]
        assert wait_for(lambda: not _host_processes_running(marker), 5.0), "a run outlived its server"
        assert _sh(manager, "echo again")[:2] == (0, "again\n")  # a new server took its place
    finally:
        manager.shutdown()


def test_without_nested_namespaces_each_run_builds_its_own_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation, "_task_namespaces", lambda bwrap: None)
    manager = EnvironmentManager.from_settings(_settings(tmp_path / "home", runtime_sandbox_launcher="auto"))
    try:
        assert manager.isolation is not None and manager.isolation.unshare is None
        code, out, _ = _sh(manager, "id -u; cat /proc/[0-9]*/comm")
        assert code == 0 and "bwrap" in out.split()  # its own sandbox, bwrap's init first
        if os.geteuid() == 0:
            assert int(out.split()[0]) == manager.isolation.user_for("wf-1")
    finally:
        manager.shutdown()


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP service on the machine's loopback, standing for an internal database or metadata server."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.sendall(b"internal secret\n")
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    stop.set()
    thread.join()
    server.close()


_CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    print(socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3).recv(100).decode())\n"
    "except OSError as exc:\n"
    "    print('refused', type(exc).__name__)\n"
)


def test_network_is_off_unless_the_run_asks_and_the_policy_allows(
    isolated: EnvironmentManager, listener: int
) -> None:
    workspace = isolated.workspace_for("wf-1")
    argv = [sys.executable, "-c", _CONNECT, str(listener)]
    assert isolated.run(argv, workspace).stdout.startswith("refused")
    assert isolated.run(argv, workspace, network=True).stdout.startswith("internal secret")
    isolated.network = "off"
    assert isolated.run(argv, workspace, network=True).stdout.startswith("refused")


def test_a_command_task_asks_for_the_network_in_its_payload(
    isolated: EnvironmentManager, listener: int
) -> None:
    workspace = isolated.workspace_for("wf-1")
    payload = {"argv": [sys.executable, "-c", _CONNECT, str(listener)]}
    executor = CommandExecutor(isolated)
    offline = executor.execute(
        TaskSpec(task_id="a", workflow_id="wf-1", executor_type="command_executor", payload=payload),
        workspace,
    )
    online = executor.execute(
        TaskSpec(
            task_id="b",
            workflow_id="wf-1",
            executor_type="command_executor",
            payload={**payload, "network": True},
        ),
        workspace,
    )
    assert offline.output["stdout"].startswith("refused")
    assert online.output["stdout"].startswith("internal secret")


def test_files_the_runtime_writes_are_the_task_s_to_change(isolated: EnvironmentManager) -> None:
    workspace = isolated.workspace_for("wf-1")
    writer = FileWriter()
    written = writer.execute(
        TaskSpec(
            task_id="w",
            workflow_id="wf-1",
            executor_type="file_writer",
            payload={"path": "src/a.txt", "content": "old\n"},
        ),
        workspace,
    )
    assert written.ok, written.feedback
    code, out, err = _sh(isolated, "echo new > src/a.txt && touch src/b.txt && cat src/a.txt")
    assert (code, out) == (0, "new\n"), err


def test_the_runtime_refuses_to_start_where_tasks_cannot_be_isolated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation, "probe_isolation", lambda: "bubblewrap (bwrap) is not installed")
    with pytest.raises(BackendUnavailableError, match="cannot be isolated") as raised:
        EnvironmentManager.from_settings(_settings(tmp_path / "home"))
    assert 'runtime_sandbox_isolation = "none"' in (raised.value.hint or "")
    # The operator's explicit opt-out runs tasks unisolated.
    manager = EnvironmentManager.from_settings(_settings(tmp_path / "home", runtime_sandbox_isolation="none"))
    assert manager.isolation is None


def test_the_machine_provides_namespaces() -> None:
    """CI machines must isolate tasks: a missing bubblewrap fails here instead of weakening the rest."""
    assert isolation.probe_isolation() is None


def test_tool_prefixes_are_bound_and_the_data_directory_never_is(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    base = tmp_path / "base" / "bin"
    base.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base}\n")
    home = tmp_path / "home"
    (home / "tools" / "bin").mkdir(parents=True)
    sandbox = NamespaceSandbox.create(hidden=[home])
    command = sandbox.command(
        ["true"],
        workspace=home / "workspaces" / "wf",
        workflow_id="wf",
        path=f"{venv / 'bin'}:{home / 'tools' / 'bin'}:/usr/bin",
        network=False,
        processes=8,
    )
    bound = {command[i + 1] for i, word in enumerate(command) if word == "--ro-bind"}
    assert str(venv) in bound and str(tmp_path / "base") in bound
    assert not any(path.startswith(str(home)) for path in bound)
    assert "--unshare-net" in command


def test_limits_reach_the_isolated_program(tmp_path: Path) -> None:
    manager = EnvironmentManager(
        tmp_path / "ws",
        limits=SandboxLimits(timeout_seconds=10, memory_mb=256),
        isolation=NamespaceSandbox.create(hidden=[tmp_path]),
    )
    outcome = manager.run(["sh", "-c", "ulimit -d; ulimit -n"], manager.workspace_for("wf"))
    assert outcome.stdout.split() == [str(256 * 1024), "1024"], outcome.stderr


def test_a_workflow_cannot_bind_a_home_or_a_credentials_directory_through_its_path(
    isolated: EnvironmentManager, tmp_path: Path
) -> None:
    secrets = tmp_path / "keys" / ".ssh"
    secrets.mkdir(parents=True)
    (secrets / "id_rsa").write_text("PRIVATE KEY")
    secrets.chmod(0o755)
    (secrets / "id_rsa").chmod(0o644)  # readable by anyone: only the mount keeps it out
    home = Path.home()
    path = f"{secrets}:{home}:/usr/bin:/bin"
    _, out, err = _sh(
        isolated, f"cat {secrets}/id_rsa; ls {home} | head -1; echo end", env_overrides={"PATH": path}
    )
    assert out.strip().splitlines() == ["end"], (out, err)


def test_a_configuration_file_under_etc_is_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/etc is shown to tasks; the configuration file the runtime read there is not."""
    etc_dir = Path("/etc/librarian-test-" + tmp_path.name)
    etc_dir.mkdir()
    try:
        config = etc_dir / "config.toml"
        config.write_text('llm_api_key = "sk-from-etc"\n')
        config.chmod(0o644)
        monkeypatch.setenv("LIBRARIAN_CONFIG", str(config))
        manager = EnvironmentManager.from_settings(Settings.load(home=tmp_path / "home"))
        assert manager.isolation is not None
        _, out, _ = _sh(manager, f"cat {config}; echo end")
        assert "sk-from-etc" not in out and out.strip().endswith("end")
        manager.shutdown()
    finally:
        for child in etc_dir.iterdir():
            child.unlink()
        etc_dir.rmdir()


def test_a_task_cannot_have_the_runtime_hand_it_a_file_through_a_link(
    isolated: EnvironmentManager, tmp_path: Path
) -> None:
    """A task replaces its tmp with a link to a file of the runtime's; the next run must not chown it."""
    precious = tmp_path / "runtime-owned.txt"
    precious.write_text("the runtime's")
    owner_before = precious.stat().st_uid
    _sh(isolated, f"rm -rf tmp && ln -s {precious} tmp")
    _sh(isolated, "true")  # the next run prepares tmp again
    assert precious.stat().st_uid == owner_before


def test_a_link_in_place_of_the_code_directory_never_makes_the_runtime_write_elsewhere(
    isolated: EnvironmentManager, tmp_path: Path
) -> None:
    from librarian.runtime.executors.code import CodeExecutor

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _sh(isolated, f"rm -rf .librarian && ln -s {elsewhere} .librarian")
    task = TaskSpec(
        task_id="code", workflow_id="wf-1", executor_type="code_executor", payload={"code": "print('ran')"}
    )
    result = CodeExecutor(isolated).execute(task, isolated.workspace_for("wf-1"))
    assert result.ok and result.output["stdout"] == "ran\n", result.feedback
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
