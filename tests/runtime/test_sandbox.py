"""The Environment Manager with real processes: no shell, no leaked secrets, limits that bite."""

from __future__ import annotations

import resource
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from librarian.config import Settings
from librarian.errors import InvalidInputError
from librarian.runtime.contracts import Workspace
from librarian.runtime.sandbox import (
    FORKSERVER_AVAILABLE,
    CommandNotFoundError,
    EnvironmentManager,
    SandboxLimits,
)
from tests.processes import process_gone, wait_for

MiB = 1024 * 1024
HAS_PRLIMIT = shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin") is not None


LAUNCHERS = [
    "python",
    pytest.param("prlimit", marks=pytest.mark.skipif(not HAS_PRLIMIT, reason="no prlimit")),
    pytest.param("forkserver", marks=pytest.mark.skipif(not FORKSERVER_AVAILABLE, reason="no pidfd")),
]


@pytest.fixture(params=LAUNCHERS)
def manager(tmp_path: Path, request: pytest.FixtureRequest) -> EnvironmentManager:
    """A manager with each launcher: every behaviour below must hold for all of them."""
    return EnvironmentManager(
        tmp_path / "workspaces",
        limits=SandboxLimits(timeout_seconds=30, memory_mb=1024, output_bytes=100_000),
        launcher=request.param,
    )


@pytest.fixture
def workspace(manager: EnvironmentManager) -> Workspace:
    return manager.workspace_for("wf-1")


def test_workspace_is_a_directory_per_workflow_under_the_root(manager: EnvironmentManager) -> None:
    workspace = manager.workspace_for("wf.2024_a-b")
    assert workspace.root == manager.root / "wf.2024_a-b"
    assert (workspace.root / "tmp").is_dir()
    assert manager.workspace_for("wf.2024_a-b") == workspace  # idempotent


@pytest.mark.parametrize("bad", ["..", "../escape", "a/b", "/etc", "", ".hidden", "x" * 200, "a\0b", "wf\n"])
def test_workflow_ids_that_could_traverse_are_refused(manager: EnvironmentManager, bad: str) -> None:
    with pytest.raises(InvalidInputError, match="cannot name a workspace"):
        manager.workspace_for(bad)
    assert not (manager.root.parent / "escape").exists()


def test_from_settings_uses_home_the_runtime_limits_and_the_launcher(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path,
        runtime_task_timeout_seconds=7,
        runtime_task_memory_mb=300,
        runtime_task_output_bytes=4096,
        runtime_sandbox_launcher="python",
    )
    manager = EnvironmentManager.from_settings(settings)
    assert manager.root == (tmp_path / "workspaces").resolve()
    assert manager.launcher == "python"
    assert (manager.limits.timeout_seconds, manager.limits.memory_mb, manager.limits.output_bytes) == (
        7,
        300,
        4096,
    )


def test_argv_values_are_never_interpreted_by_a_shell(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    (workspace.root / "x").write_text("keep me")
    hostile = ["; rm -rf x", "$(touch pwned)", "`touch pwned2`", "*", "a && rm x"]
    outcome = manager.run(["printf", "%s\n", *hostile], workspace)
    assert outcome.exit_code == 0
    assert outcome.stdout.splitlines() == hostile
    assert (workspace.root / "x").read_text() == "keep me"
    assert not (workspace.root / "pwned").exists() and not (workspace.root / "pwned2").exists()


def test_worker_secrets_never_reach_the_command(
    manager: EnvironmentManager, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-worker-secret",
        "AWS_ACCESS_KEY_ID": "AKIAWORKERKEY",
        "LIBRARIAN_DATABASE_URL": "postgresql://admin:hunter2@db/prod",
        "GITHUB_TOKEN": "ghp_workertoken",
        "DB_PASSWORD": "hunter2-password",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    outcome = manager.run(["env"], workspace, env_overrides={"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"})
    assert outcome.exit_code == 0
    printed = dict(line.split("=", 1) for line in outcome.stdout.splitlines() if "=" in line)
    for name, value in secrets.items():
        assert name not in printed
        assert value not in outcome.stdout
    assert printed["HOME"] == str(workspace.root)
    assert printed["TMPDIR"] == str(workspace.root / "tmp")
    assert printed["AWS_ENDPOINT_URL"] == "http://127.0.0.1:5000"  # set by the task itself: allowed
    assert set(printed) <= {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ", "AWS_ENDPOINT_URL", "PWD", "_"}


def test_a_secret_passthrough_is_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="AWS_SECRET_ACCESS_KEY"):
        EnvironmentManager(tmp_path, passthrough=["LANG", "AWS_SECRET_ACCESS_KEY"])
    with pytest.raises(InvalidInputError, match="GITHUB_TOKEN"):
        EnvironmentManager(tmp_path, passthrough=["GITHUB_TOKEN"])


def test_bad_override_names_are_refused(manager: EnvironmentManager, workspace: Workspace) -> None:
    with pytest.raises(InvalidInputError, match="not valid"):
        manager.run(["true"], workspace, env_overrides={"BAD=NAME": "x"})


def test_runs_in_the_workspace_and_reports_exit_code_and_stderr(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    outcome = manager.run(["/bin/sh", "-c", "pwd; echo boom >&2; exit 3"], workspace)
    assert outcome.exit_code == 3
    assert outcome.stdout.strip() == str(workspace.root)
    assert outcome.stderr == "boom\n"
    assert not outcome.timed_out and outcome.signal_name is None


def test_stdin_is_fed_to_the_program(manager: EnvironmentManager, workspace: Workspace) -> None:
    data = "line\n" * 50_000  # larger than a pipe buffer
    outcome = manager.run(["wc", "-l"], workspace, stdin=data)
    assert outcome.stdout.strip() == "50000"


def test_resource_limits_are_applied_to_the_program(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    outcome = manager.run(["cat", "/proc/self/limits"], workspace, memory_mb=300, timeout_seconds=5)
    limits = {line[:26].strip(): line[26:].split() for line in outcome.stdout.splitlines()[1:]}
    assert limits["Max data size"][:2] == [str(300 * MiB)] * 2
    assert limits["Max open files"][:2] == ["1024", "1024"]
    assert limits["Max file size"][0] == str(4 * 1024**3)
    assert int(limits["Max cpu time"][0]) >= 5


def test_memory_limit_stops_a_process_allocating_too_much(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    allocate = [sys.executable, "-I", "-c", "b = bytearray(300 * 1024 * 1024); print(len(b))"]
    limited = manager.run(allocate, workspace, memory_mb=150)
    assert limited.exit_code != 0
    assert "MemoryError" in limited.stderr
    roomy = manager.run(allocate, workspace, memory_mb=1024)
    assert roomy.exit_code == 0, roomy.stderr
    assert roomy.stdout.strip() == str(300 * MiB)


def test_output_keeps_the_head_and_says_it_was_cut(manager: EnvironmentManager, workspace: Workspace) -> None:
    script = "import sys; sys.stdout.write('a' * 1000 + 'b' * 199000); sys.stderr.write('e' * 50)"
    outcome = manager.run([sys.executable, "-I", "-c", script], workspace, output_bytes=1000)
    assert outcome.stdout_truncated and not outcome.stderr_truncated
    assert outcome.stdout.startswith("a" * 1000)
    assert "b" not in outcome.stdout.split("\n")[0]
    assert "kept the first 1,000 of 200,000 bytes" in outcome.stdout
    assert outcome.stdout_bytes == 200_000
    assert outcome.stderr == "e" * 50


def test_timeout_kills_the_whole_process_group(manager: EnvironmentManager, workspace: Workspace) -> None:
    # The child starts its own child (a grandchild of the sandbox) and waits for it.
    script = "sleep 60 & echo $! > grandchild.pid; wait"
    started = time.monotonic()
    outcome = manager.run(["/bin/sh", "-c", script], workspace, timeout_seconds=1)
    assert time.monotonic() - started < 10
    assert outcome.timed_out
    assert outcome.signal_name == "SIGKILL"
    grandchild = int((workspace.root / "grandchild.pid").read_text())
    assert wait_for(lambda: process_gone(grandchild), 5.0), "the grandchild outlived the timeout"


def test_background_children_do_not_outlive_their_task(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    started = time.monotonic()
    outcome = manager.run(["/bin/sh", "-c", "sleep 60 & echo $!"], workspace, timeout_seconds=30)
    assert time.monotonic() - started < 10  # not held until the background sleep ends
    assert outcome.exit_code == 0 and not outcome.timed_out
    assert wait_for(lambda: process_gone(int(outcome.stdout.strip())), 5.0)


def test_a_missing_program_is_a_clear_error(manager: EnvironmentManager, workspace: Workspace) -> None:
    with pytest.raises(CommandNotFoundError, match="no-such-program-xyz"):
        manager.run(["no-such-program-xyz", "--help"], workspace)
    with pytest.raises(CommandNotFoundError, match="does not exist"):
        manager.run(["./missing.sh"], workspace)


@pytest.mark.parametrize("argv", [[], "ls -l", ["ls", 3], ["ls", "a\0b"]])
def test_malformed_argv_is_refused(manager: EnvironmentManager, workspace: Workspace, argv: object) -> None:
    with pytest.raises(InvalidInputError, match="argv"):
        manager.run(argv, workspace)  # type: ignore[arg-type]


def test_auto_picks_the_fork_server_then_prlimit_then_python(tmp_path: Path) -> None:
    auto = EnvironmentManager(tmp_path)
    fallback = "prlimit" if HAS_PRLIMIT else "python"
    assert auto.launcher == ("forkserver" if FORKSERVER_AVAILABLE else fallback)
    assert EnvironmentManager(tmp_path, launcher="python").launcher == "python"


def test_limits_above_the_workers_own_hard_limit_are_capped_not_fatal(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    roomy = EnvironmentManager(
        manager.root, limits=SandboxLimits(open_files=hard + 100), launcher=manager.launcher
    )
    outcome = roomy.run(["cat", "/proc/self/limits"], workspace)
    assert outcome.exit_code == 0, outcome.stderr
    line = next(line for line in outcome.stdout.splitlines() if line.startswith("Max open files"))
    assert line[26:].split()[:2] == [str(hard)] * 2


# Not the Python launcher: its own interpreter start takes about 10 ms.
@pytest.mark.parametrize("manager", LAUNCHERS[1:], indirect=True)
def test_a_short_program_is_reported_promptly(manager: EnvironmentManager, workspace: Workspace) -> None:
    # Exit is noticed through a pidfd (or short polls), not after a fixed 20 ms sleep.
    durations = sorted(manager.run(["true"], workspace).duration_seconds for _ in range(15))
    assert durations[0] < 0.015, durations


def test_a_task_gets_the_default_handling_of_sigint_and_sigterm(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    # An ignored signal stays ignored across exec: a launcher that ignored one would make a task's
    # `kill PID` (SIGTERM) or Ctrl-C useless. The task must ignore them exactly when this process does
    # (a shell without job control starts background jobs with SIGINT ignored).
    outcome = manager.run(["grep", "SigIgn", "/proc/self/status"], workspace)
    ignored = int(outcome.stdout.split()[1], 16)
    ours = next(
        line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("SigIgn")
    )
    assert outcome.exit_code == 0
    for number in (signal.SIGINT, signal.SIGTERM):
        bit = 1 << (number - 1)
        assert ignored & bit == int(ours.split()[1], 16) & bit, f"{number.name} handling changed"


def test_a_program_that_cannot_be_executed_fails_like_in_a_shell(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    script = workspace.root / "not-executable.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    outcome = manager.run(["./not-executable.sh"], workspace)
    assert outcome.exit_code == 126, outcome
    assert "ermission denied" in outcome.stderr


def test_an_argv_too_large_for_a_fork_server_message_still_runs(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    outcome = manager.run(["printf", "%s", *["x" * 1000] * 300], workspace)  # 300 kB of arguments
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout_bytes == 300_000


def test_an_argument_longer_than_the_kernel_allows_is_a_task_failure(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    outcome = manager.run(["printf", "%s", "x" * 300_000], workspace)  # one argument: 128 KiB at most
    assert outcome.exit_code == 126
    assert "Argument list too long" in outcome.stderr


def test_a_memory_limit_too_small_for_a_fork_server_still_applies(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    # Below 64 MiB the fork server (which lives under the limit itself) hands the run to prlimit.
    outcome = manager.run(["cat", "/proc/self/limits"], workspace, memory_mb=32)
    line = next(line for line in outcome.stdout.splitlines() if line.startswith("Max data size"))
    assert outcome.exit_code == 0, outcome.stderr
    assert line[26:].split()[:2] == [str(32 * MiB)] * 2


def test_address_space_a_runtime_only_reserves_is_not_memory(
    manager: EnvironmentManager, workspace: Workspace
) -> None:
    """JIT runtimes reserve huge inaccessible regions (Deno's V8: over 64 GiB) and never use them."""
    reserve = [
        sys.executable,
        "-I",
        "-c",
        "import mmap; m = mmap.mmap(-1, 64 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, "
        "prot=0); print('reserved', len(m))",
    ]
    outcome = manager.run(reserve, workspace, memory_mb=256)
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.strip() == f"reserved {64 << 30}"
