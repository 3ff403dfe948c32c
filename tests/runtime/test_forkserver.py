"""Fork servers: one per limit profile, restarted when killed, retired without losing a running program."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from librarian.runtime import forkserver
from librarian.runtime.forkserver import (
    ForkServer,
    ForkServerError,
    ForkServers,
    Limits,
    ServedProgram,
    ServerProfile,
)
from librarian.runtime.sandbox import FORKSERVER_AVAILABLE
from tests.processes import process_gone, wait_for

pytestmark = pytest.mark.skipif(not FORKSERVER_AVAILABLE, reason="the fork server needs Linux 5.3+")

MiB = 1024 * 1024


def profile(memory_mb: int, cpu_seconds: int = 600) -> ServerProfile:
    memory = memory_mb * MiB
    limits: Limits = (
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1),
    )
    return ServerProfile(limits)


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[ForkServers]:
    monkeypatch.setattr(forkserver, "_MAX_SERVERS", 4)  # so that a few profiles show the eviction
    pool = ForkServers()
    yield pool
    pool.close()


def run(servers: ForkServers, argv: list[str], limits: ServerProfile, cwd: Path) -> tuple[int, str]:
    """Run ``argv`` to its end through ``servers``: exit code and stdout."""
    program, output = start(servers, argv, limits, cwd)
    code = program.wait()
    program.close()
    with os.fdopen(output, "rb") as reader:
        return code, reader.read().decode()


def start(
    servers: ForkServers, argv: list[str], limits: ServerProfile, cwd: Path
) -> tuple[ServedProgram, int]:
    """Start ``argv``; the program and the read end of its stdout."""
    read, write = os.pipe()
    with open(os.devnull, "rb") as devnull:
        try:
            program = servers.spawn(
                argv,
                profile=limits,
                cwd=cwd,
                env={"PATH": os.defpath},
                stdin=devnull.fileno(),
                stdout=write,
                stderr=write,
            )
        finally:
            os.close(write)
    return program, read


def test_each_limit_profile_gets_a_server_of_its_own_and_at_most_four_live(
    servers: ForkServers, tmp_path: Path
) -> None:
    for memory_mb in (200, 300, 400, 500, 600):
        code, limits = run(servers, ["cat", "/proc/self/limits"], profile(memory_mb), tmp_path)
        address_space = next(line for line in limits.splitlines() if line.startswith("Max address space"))
        assert code == 0 and address_space[26:].split()[:2] == [str(memory_mb * MiB)] * 2
    assert len(servers.server_pids()) == 4  # the 200 MiB one was retired
    code, _ = run(servers, ["true"], profile(600), tmp_path)
    assert code == 0 and len(servers.server_pids()) == 4  # reused, not a fifth


def test_a_killed_server_is_replaced_and_its_orphan_killed(servers: ForkServers, tmp_path: Path) -> None:
    program, output = start(servers, ["sh", "-c", "echo $$; exec sleep 60"], profile(256), tmp_path)
    with os.fdopen(output, "rb") as reader:
        pid = int(reader.readline())
        [server] = servers.server_pids()
        os.kill(server, signal.SIGKILL)
        assert program.wait() == -signal.SIGKILL
    program.close()
    assert wait_for(lambda: process_gone(pid), 5.0), "the orphaned program outlived its server"
    code, text = run(servers, ["echo", "again"], profile(256), tmp_path)
    assert (code, text) == (0, "again\n")
    assert servers.server_pids() != [server]


def test_a_server_whose_socket_closed_is_replaced_before_its_exit_can_be_reaped(tmp_path: Path) -> None:
    # A SIGKILLed server's socket closes before the kernel makes it a zombie; on a busy machine a spawn
    # can fall in between, when poll() still says the server runs. Stand in for that moment: a live
    # process whose socket's far end is closed.
    server = ForkServer(profile(256))
    still_running = subprocess.Popen(["sleep", "60"])
    control, far_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    far_end.close()
    server._control, server._process = control, still_running
    read, write = os.pipe()
    try:
        with open(os.devnull, "rb") as devnull:
            program = server.spawn(
                ["echo", "replaced"],
                cwd=tmp_path,
                env={"PATH": os.defpath},
                stdin=devnull.fileno(),
                stdout=write,
                stderr=write,
            )
        os.close(write)
        assert program.wait() == 0
        program.close()
        with os.fdopen(read, "rb") as reader:
            assert reader.read() == b"replaced\n"
        assert server.pid not in (None, still_running.pid)
        assert still_running.returncode is not None, "the replaced server was left unreaped"
    finally:
        server.close()
        still_running.kill()
        still_running.wait()


def test_a_retired_server_finishes_its_running_program_then_exits(
    servers: ForkServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_run, output = start(servers, ["sh", "-c", "sleep 0.5; echo done"], profile(256), tmp_path)
    [first] = servers.server_pids()
    # Any CPU time at all now counts as near the limit: the next spawn retires this server.
    monkeypatch.setattr(forkserver, "_CPU_SHARE_BEFORE_RETIRING", 0.0)
    code, _ = run(servers, ["true"], profile(256), tmp_path)
    assert code == 0 and servers.server_pids() == []  # retired after starting it
    assert long_run.wait() == 0
    long_run.close()
    with os.fdopen(output, "rb") as reader:
        assert reader.read() == b"done\n"
    assert wait_for(lambda: process_gone(first), 5.0), "the retired server did not exit"
    monkeypatch.setattr(forkserver, "_CPU_SHARE_BEFORE_RETIRING", 0.5)
    assert run(servers, ["true"], profile(256), tmp_path)[0] == 0
    assert servers.server_pids() not in ([], [first])


def test_a_program_that_cannot_start_is_reported_with_its_errno(servers: ForkServers, tmp_path: Path) -> None:
    with pytest.raises(ForkServerError) as raised:
        start(servers, ["./not-here"], profile(256), tmp_path)
    assert raised.value.errno == 2  # ENOENT, from the exec in the server
    assert run(servers, ["true"], profile(256), tmp_path)[0] == 0  # the server carries on


def test_closing_the_servers_kills_what_they_run(servers: ForkServers, tmp_path: Path) -> None:
    program, output = start(servers, ["sh", "-c", "echo $$; exec sleep 60"], profile(256), tmp_path)
    with os.fdopen(output, "rb") as reader:
        pid = int(reader.readline())
    servers.close()
    assert wait_for(lambda: process_gone(pid), 5.0), "a program outlived the closed fork server"
    assert program.wait() == -signal.SIGKILL
    program.close()


def test_a_stray_connection_without_descriptors_is_ignored(servers: ForkServers, tmp_path: Path) -> None:
    # A request must carry the program's descriptors; one without is dropped, not fatal to the server.
    assert run(servers, ["true"], profile(256), tmp_path)[0] == 0
    server = next(iter(servers._servers.values()))
    assert server._control is not None
    socket.send_fds(server._control, [b'{"argv": ["true"]}'], [])
    assert run(servers, ["echo", "fine"], profile(256), tmp_path) == (0, "fine\n")


def test_threads_spawning_under_more_profiles_than_servers_all_get_their_limits(
    servers: ForkServers, tmp_path: Path
) -> None:
    # Six profiles from eight threads: servers are retired under running spawns, none is lost.
    def limit_of(memory_mb: int) -> str:
        code, limits = run(servers, ["cat", "/proc/self/limits"], profile(memory_mb), tmp_path)
        assert code == 0
        return next(line for line in limits.splitlines() if line.startswith("Max address space"))

    wanted = [200 + 50 * (index % 6) for index in range(48)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        seen = list(pool.map(limit_of, wanted))
    assert [line[26:].split()[0] for line in seen] == [str(memory_mb * MiB) for memory_mb in wanted]
    assert len(servers.server_pids()) <= 4


def test_a_retired_server_is_never_started_again(tmp_path: Path) -> None:
    # A thread that picked a server just before another retired it must not revive it: a revived
    # server belongs to no pool, and closing it later would kill the program it started.
    server = ForkServer(profile(256))
    read, write = os.pipe()
    try:
        first = server.spawn(["true"], cwd=tmp_path, env={}, stdin=read, stdout=write, stderr=write)
        assert first.wait() == 0
        first.close()
        server.retire()
        with pytest.raises(Exception) as raised:
            server.spawn(["true"], cwd=tmp_path, env={}, stdin=read, stdout=write, stderr=write)
    finally:
        os.close(read)
        os.close(write)
    assert type(raised.value).__name__ == "_RetiredError"
    assert server.pid is None
