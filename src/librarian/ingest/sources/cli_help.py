"""A connector that documents a command-line tool by walking its help over every subcommand.

``walk_cli_help("aws", scopes=("s3api",))`` runs ``aws help``, reads the subcommands it lists, runs
their help in parallel, breadth first, and parses each page into a :class:`CliCommand` (synopsis,
description, options, subcommands); :func:`cli_documents` turns them into one
:class:`~librarian.ingest.sources.base.SourceDocument` per command, so a search for ``--tagging``
finds ``aws s3api put-object``.

How help is asked for: the strategies ``<cmd> <path> --help``, ``<cmd> help <path>``,
``<cmd> <path> -h`` and ``<cmd> <path> help`` are tried in that order, and the one that works at a
depth is tried first for the next depth. A page is accepted when it parses to a synopsis, options or
subcommands, the tool exited 0 (or listed options, as ``git commit -h`` does with status 129), and it
is not its parent's page again (a tool that ignores an unknown word prints its parent's help). The
last strategy passes ``help`` as a positional argument, which most tools would take as a real argument
(``pip install help`` installs a package), so it is only tried once the tool's own output advertises
it, as the AWS CLI v1 does (``aws <command> help``). A root page that lists no commands may still
lead to them: it names them (``TOOL help CMD``), or it is the page of the tool's command-listing
command (Symfony Console and cleo print ``Usage: list ...``, "Lists commands."), which is then run.
A form that succeeds silently is asked again with a pseudo-terminal as stdin: some tools print help
only to a person and otherwise process stdin (clean-css-cli 5 minifies it).

Sandbox: every child runs from an argument list (never a shell) with stdin closed (or a pseudo-terminal
nothing is typed into, for the silent tools above), in a new session
whose whole process group is killed at the timeout or when its output passes the cap; the working
directory and ``HOME`` are a fresh temporary directory; the environment is rebuilt from scratch
(``PATH``, a UTF-8 locale, pagers set to ``cat``, no credentials, ``AWS_EC2_METADATA_DISABLED``), so
secrets in the caller's environment never reach the tool. Subcommand names are used only when they
match ``[A-Za-z0-9][A-Za-z0-9._:-]*``; others are reported and never executed. Printing help needs no
network, but the network is not blocked at OS level: a tool that reaches out anyway is only bounded
by the timeout. Run the walk in a container or network namespace without network when that matters.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType

from librarian.errors import InvalidInputError, NotFoundError
from librarian.ingest.sources.base import SourceProblem
from librarian.ingest.sources.cli_help_documents import cli_documents
from librarian.ingest.sources.cli_help_parse import (
    CliCommand,
    CliOption,
    HelpPage,
    clean_help_text,
    looks_like_help,
    parse_help,
    parse_version,
)
from librarian.installed import package_of_program

__all__ = [
    "OUTPUT_CAP_BYTES",
    "CliCommand",
    "CliHelpResult",
    "CliOption",
    "cli_documents",
    "detect_cli_version",
    "walk_cli_help",
]

# How far a walk goes unless told otherwise: subcommand levels, and help pages fetched in all.
DEFAULT_MAX_DEPTH = 3
DEFAULT_MAX_COMMANDS = 2000
OUTPUT_CAP_BYTES = 2 * 1024 * 1024
RAW_HELP_CAP_CHARS = 64 * 1024
_SAFE_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_VERSION_ARGS: tuple[tuple[str, ...], ...] = (("--version",), ("version",), ("-V",))


@dataclass
class CliHelpResult:
    """What :func:`walk_cli_help` found: commands in breadth-first order, problems, tool version."""

    command: str
    executable: str
    version: str | None
    commands: list[CliCommand] = field(default_factory=list)
    problems: list[SourceProblem] = field(default_factory=list)
    elapsed_seconds: float = 0.0


@dataclass(frozen=True)
class _Strategy:
    prefix: tuple[str, ...]
    suffix: tuple[str, ...]
    advertised_only: bool = False

    def args(self, path: tuple[str, ...]) -> tuple[str, ...]:
        return (*self.prefix, *path, *self.suffix)


# A page that says its command lists the tool's commands ("Lists commands.", "List all commands").
_LISTS_COMMANDS = re.compile(r"(?i)\blists?\s+(?:all\s+|the\s+|available\s+)*commands\b")

_STRATEGIES = (
    _Strategy((), ("--help",)),  # <cmd> <path> --help
    _Strategy(("help",), ()),  # <cmd> help <path>
    _Strategy((), ("-h",)),  # <cmd> <path> -h
    # <cmd> <path> help: a trailing "help" is an argument to most tools, so only once advertised.
    _Strategy((), ("help",), advertised_only=True),
)


@dataclass(frozen=True)
class _RunOutput:
    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    truncated: bool


class _Sandbox:
    """Runs the tool with a scrubbed environment, a private HOME, a timeout and an output cap."""

    def __init__(
        self, executable: str, *, timeout: float, env: Mapping[str, str] | None, output_cap: int
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="librarian-cli-help-")
        self.executable = executable
        self.timeout = timeout
        self.output_cap = output_cap
        self.env = _scrubbed_env(self._tmp.name, env)

    def __enter__(self) -> _Sandbox:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._tmp.cleanup()

    def run(self, args: Sequence[str], timeout: float | None = None, *, terminal: bool = False) -> _RunOutput:
        """Run the tool with ``args``; raises OSError when it cannot be started.

        With ``terminal``, stdin is a fresh pseudo-terminal instead of ``/dev/null``, for tools that
        print help only to a person (see :meth:`_Walker.fetch`); nothing is ever typed into it, and the
        tool's output still goes to pipes.
        """
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        controller, stdin = os.openpty() if terminal else (None, subprocess.DEVNULL)
        try:
            proc = subprocess.Popen(
                [self.executable, *args],
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._tmp.name,
                env=self.env,
                # Its own session makes the child the leader of a process group that also holds every
                # grandchild (groff, a pager), so one killpg ends them all. The new session also has
                # no controlling terminal: the pseudo-terminal is only an open file to it.
                start_new_session=True,
            )
        except BaseException:
            if controller is not None:
                os.close(controller)
            raise
        finally:
            if controller is not None:
                os.close(stdin)
        try:
            return self._collect(proc, deadline)
        finally:
            if controller is not None:
                os.close(controller)

    def _collect(self, proc: subprocess.Popen[bytes], deadline: float) -> _RunOutput:
        """Read ``proc``'s output until it exits, the deadline passes or the cap is reached; then kill
        its process group."""
        assert proc.stdout is not None and proc.stderr is not None
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        buffers = {out_fd: bytearray(), err_fd: bytearray()}
        total = 0
        timed_out = truncated = False
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            selector.register(proc.stderr, selectors.EVENT_READ)
            while selector.get_map() and not truncated:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                for key, _ in selector.select(remaining):
                    data = os.read(key.fd, 65536)
                    if not data:
                        selector.unregister(key.fileobj)
                        continue
                    buffers[key.fd] += data
                    total += len(data)
                    if total > self.output_cap:
                        truncated = True
                        break
        if not (timed_out or truncated):
            timed_out = not _wait_unreaped(proc.pid, deadline)
        # Kill the group every time, also after a normal exit: nothing a help run started (a daemon
        # that closed its output) may outlive it. The leader is not reaped yet, so its pid, which
        # is the group id, cannot have been reused by another process.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        returncode = proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        cap = self.output_cap
        return _RunOutput(
            returncode, bytes(buffers[out_fd][:cap]), bytes(buffers[err_fd][:cap]), timed_out, truncated
        )


def _wait_unreaped(pid: int, deadline: float) -> bool:
    """Wait until ``pid`` exits, leaving it a zombie (WNOWAIT); False when the deadline passes first."""
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)  # the output is closed already, so the exit is normally a moment away
    return True


def _scrubbed_env(home: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        # Tools installed alongside Librarian come first, as in the task sandbox
        # (runtime/sandbox.py): the help indexed is that of the tool tasks will run.
        "PATH": _default_path(),
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "PAGER": "cat",
        "MANPAGER": "cat",
        "GIT_PAGER": "cat",
        "AWS_PAGER": "",
        "AWS_EC2_METADATA_DISABLED": "true",
        # Point the AWS CLI at files that do not exist, so no profile or credential is ever read.
        "AWS_CONFIG_FILE": os.path.join(home, "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": os.path.join(home, "aws-credentials"),
    }
    env.update(extra or {})
    return env


def _default_path() -> str:
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])


def _resolve(command: str, env: Mapping[str, str] | None) -> str:
    if not command or command.startswith("-"):
        raise InvalidInputError(f"CLI command {command!r} must be a program name or path")
    search_path = (env or {}).get("PATH") or _default_path()
    found = shutil.which(command, path=search_path)
    if found is None:
        raise NotFoundError(
            f"CLI command {command!r} was not found or is not executable",
            hint="install the tool, or pass its absolute path",
        )
    # Children run in the sandbox directory, where a relative path would no longer resolve.
    return os.path.abspath(found)


def _version_from(sandbox: _Sandbox, timeout: float) -> str | None:
    for args in _VERSION_ARGS:
        try:
            out = sandbox.run(args, timeout=timeout)
        except OSError:
            break
        if out.returncode == 0 and not out.timed_out:
            version = parse_version(clean_help_text(out.stdout) + "\n" + clean_help_text(out.stderr))
            if version:
                return version
    # A program that prints no version (many npm tools): its package recorded one.
    package = package_of_program(sandbox.executable)
    return package.version if package else None


def detect_cli_version(argv0: str, *, timeout: float = 10.0) -> str | None:
    """The version a tool reports: runs ``<cmd> --version``, then ``<cmd> version``, then ``<cmd> -V``.

    Each run is sandboxed like the help walk. Returns the first version-looking token of the first
    run that exits 0 and prints one (``aws-cli/1.46.3 Python/...`` gives ``1.46.3``), else the
    version of the package that installed it (:func:`librarian.installed.package_of_program`), else
    ``None``.

    Raises:
        InvalidInputError: ``argv0`` is empty or starts with ``-``.
        NotFoundError: the tool is not on ``PATH``.
    """
    executable = _resolve(argv0, None)
    with _Sandbox(executable, timeout=timeout, env=None, output_cap=64 * 1024) as sandbox:
        return _version_from(sandbox, timeout)


@dataclass
class _Fetched:
    command: CliCommand | None
    text: str = ""
    children: list[tuple[str, str]] = field(default_factory=list)
    problems: list[SourceProblem] = field(default_factory=list)


class _Walker:
    def __init__(self, sandbox: _Sandbox, name: str) -> None:
        self._sandbox = sandbox
        self._name = name
        self._lock = threading.Lock()
        self._learned: dict[int, tuple[_Strategy, ...]] = {}
        self._advertised = False
        self._advert = re.compile(rf"(?<![\w/-]){re.escape(name)}(?:\s+<[^>\s]+>)+\s+help\b")
        # A root page that lists no commands may still name them: "More information: ajv help
        # validate", or a usage table of "validate:  ajv [validate] -s schema".
        tool = re.escape(name)
        self._named_commands = (
            re.compile(rf"(?m)^\s*{tool}\s+help\s+([A-Za-z0-9][\w-]*)\s*$"),
            re.compile(rf"(?m)^\s*([A-Za-z0-9][\w-]*):\s+{tool}\s+\[?\1\b"),
        )
        # A root page that lists only common commands may name the command listing them all
        # ("'git help -a' and 'git help -g' list available subcommands"): only those forms are run.
        self._full_listing = re.compile(rf"(?<![\w/-]){tool}\s+(help\s+-a|help\s+--all|--help-all)\b")

    def doc_path(self, path: tuple[str, ...]) -> str:
        return "/".join(path) or self._name

    def fetch(self, path: tuple[str, ...], parent_text: str | None, summary: str) -> _Fetched:
        """Get and parse the help of ``path``, trying the strategies in the learned order."""
        if not all(_SAFE_WORD.fullmatch(word) for word in path):
            return self._failed(path, f"refused subcommand path {path!r}: never run")
        depth = len(path)
        tried: set[tuple[str, ...]] = set()
        failures: list[str] = []
        for strategy in self._order(depth):
            with self._lock:
                if strategy.advertised_only and not self._advertised:
                    continue
            args = strategy.args(path)
            if args in tried:
                continue
            tried.add(args)
            shown = " ".join((self._name, *args))
            try:
                out = self._sandbox.run(args)
                if out.returncode == 0 and not (out.stdout.strip() or out.stderr.strip() or out.timed_out):
                    # Silence with success: some tools print help only when a person is reading
                    # (stdin is a terminal) and otherwise process stdin, which is empty here. Ask
                    # again with a terminal as stdin; one that then waits for typing is left as it was.
                    retry = self._sandbox.run(args, terminal=True)
                    out = out if retry.timed_out else retry
            except OSError as exc:
                return self._failed(path, f"cannot run `{shown}`: {exc}")
            stdout, stderr = clean_help_text(out.stdout), clean_help_text(out.stderr)
            if self._advert.search(f"{stdout}\n{stderr}"):
                with self._lock:
                    self._advertised = True
            if out.timed_out:
                # A tool that hangs on one form of help hangs on the others: do not pay the timeout again.
                return self._failed(
                    path,
                    f"`{shown}` timed out after {self._sandbox.timeout:g}s; its process group was killed",
                )
            text = stdout if stdout.strip() else stderr
            page = parse_help(text)
            capped = f"`{shown}` printed more than {self._sandbox.output_cap} bytes; output truncated"
            named = [] if path or page.subcommands else self._commands_named_in(text)
            if not path and not page.subcommands and not named:
                named = self._commands_listed_by(page)
            if not path:
                named = _union(page.subcommands or named, self._commands_in_full_listing(text))
            # A root page that only names its commands ("TOOL help CMD") is help, if the run succeeded.
            if not (
                looks_like_help(page, text, out.returncode, parent_text, killed=out.truncated)
                or (named and out.returncode == 0)
            ):
                if out.truncated:
                    return self._failed(path, capped)
                failures.append(f"`{shown}` ({_why_not_help(text, out.returncode, parent_text)})")
                continue
            self._learn(depth, path, args)
            command = CliCommand(
                path=path,
                synopsis=page.synopsis,
                description=page.description or summary,
                options=page.options,
                subcommands=[],
                raw_help=text[:RAW_HELP_CAP_CHARS],
                help_args=args,
                examples=page.examples,
            )
            problems = [SourceProblem(self.doc_path(path), capped)] if out.truncated else []
            return _Fetched(command, text, named if not path else page.subcommands, problems)
        return self._failed(path, "no help strategy printed help: " + ("; ".join(failures) or "none applied"))

    def _commands_listed_by(self, page: HelpPage) -> list[tuple[str, str]]:
        """The commands of a tool whose root help is the help of its command-listing command.

        Some frameworks answer ``TOOL --help`` with the page of their ``list`` command ("Usage: list
        [options] [--] [<namespace>]", "Lists commands."): the commands are what running that
        command prints. Only a command whose own page says it lists commands is run.
        """
        words = page.synopsis.split()
        if not words or words[0] == self._name or not _SAFE_WORD.fullmatch(words[0]):
            return []
        if not _LISTS_COMMANDS.search(page.description):
            return []
        try:
            out = self._sandbox.run((words[0],))
        except OSError:
            return []
        if out.returncode != 0 or out.timed_out:
            return []
        return parse_help(clean_help_text(out.stdout) or clean_help_text(out.stderr)).subcommands

    def _commands_in_full_listing(self, text: str) -> list[tuple[str, str]]:
        """The commands of the full listing the root page advertises (``git help -a``), if any."""
        found = self._full_listing.search(text)
        if found is None:
            return []
        try:
            out = self._sandbox.run(tuple(found.group(1).split()))
        except OSError:
            return []
        if out.returncode != 0 or out.timed_out:
            return []
        return parse_help(clean_help_text(out.stdout) or clean_help_text(out.stderr)).subcommands

    def _commands_named_in(self, text: str) -> list[tuple[str, str]]:
        words = [word for pattern in self._named_commands for word in pattern.findall(text)]
        return [(word, "") for word in dict.fromkeys(words) if word != "help"]

    def _failed(self, path: tuple[str, ...], reason: str) -> _Fetched:
        return _Fetched(None, problems=[SourceProblem(self.doc_path(path), reason)])

    def _order(self, depth: int) -> list[_Strategy]:
        with self._lock:
            preferred = next((self._learned[d] for d in range(depth, -1, -1) if d in self._learned), ())
        return [*preferred, *(s for s in _STRATEGIES if s not in preferred)]

    def _learn(self, depth: int, path: tuple[str, ...], args: tuple[str, ...]) -> None:
        with self._lock:
            if depth in self._learned:
                return
            # At the root "help <path>" and "<path> help" are the same argv; remember both, in order.
            self._learned[depth] = tuple(
                s for s in _STRATEGIES if s.args(path) == args and (self._advertised or not s.advertised_only)
            )


def _union(first: list[tuple[str, str]], more: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``first``, then the commands of ``more`` it lacks, each name once."""
    names = {name for name, _ in first}
    return [*first, *((name, summary) for name, summary in more if name not in names)]


def _why_not_help(text: str, returncode: int, parent_text: str | None) -> str:
    if parent_text is not None and text == parent_text:
        return "printed its parent's help again"
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), "no output")
    return f"exit {returncode}: {first_line[:120]}"


def walk_cli_help(
    command: str,
    *,
    scopes: Sequence[str] = (),
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_commands: int = DEFAULT_MAX_COMMANDS,
    workers: int = 4,
    timeout: float = 20.0,
    env: Mapping[str, str] | None = None,
) -> CliHelpResult:
    """Run a tool's help over its subcommands, breadth first and in parallel, and parse every page.

    Args:
        command: the tool, a name on ``PATH`` or a path (``aws``, ``/usr/bin/git``).
        scopes: subtrees to walk (e.g. ``("s3", "s3api")``); empty walks all. A scope may name a deeper
            subtree (``"s3api put-object"``: only that path below ``s3api``), and is walked even when
            the tool's listing omits it (``git --help`` lists common commands only).
        max_depth: deepest subcommand path walked (2 reaches ``aws s3api put-object``).
        max_commands: most help pages fetched, the tool's own included; the rest is reported.
        workers: help processes run at once.
        timeout: seconds one help process may run before its process group is killed.
        env: variables added to the scrubbed child environment (they override its defaults; nothing
            is inherited from this process except ``PATH``).

    Returns:
        The commands found, in breadth-first order, the problems met (timeouts, truncated output,
        refused subcommand names, pages no strategy printed, the ``max_commands`` cut) and the
        tool's version.

    Raises:
        InvalidInputError: a bad argument, or a scope that is not a plain subcommand name.
        NotFoundError: the tool is not on ``PATH``.

    Example:
        >>> result = walk_cli_help("aws", scopes=("s3api",), max_depth=2)  # doctest: +SKIP
        >>> put = next(c for c in result.commands if c.name == "s3api put-object")  # doctest: +SKIP
        >>> "--tagging" in {o.name for o in put.options}  # doctest: +SKIP
        True
    """
    if max_depth < 0 or max_commands < 1 or workers < 1 or timeout <= 0:
        raise InvalidInputError(
            "walk_cli_help needs max_depth >= 0, max_commands >= 1, workers >= 1 and timeout > 0"
        )
    scope_paths = tuple(dict.fromkeys(tuple(re.split(r"[\s/]+", s.strip())) for s in scopes))
    bad = [" ".join(p) for p in scope_paths if not all(_SAFE_WORD.fullmatch(word) for word in p)]
    if bad:
        raise InvalidInputError(
            f"scopes {bad!r} are not subcommand names", hint="pass subcommands such as 's3api'"
        )
    started = time.monotonic()
    executable = _resolve(command, env)
    name = Path(command).name
    with _Sandbox(executable, timeout=timeout, env=env, output_cap=OUTPUT_CAP_BYTES) as sandbox:
        result = CliHelpResult(command, executable, _version_from(sandbox, min(timeout, 10.0)))
        walker = _Walker(sandbox, name)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cli-help") as pool:
            _walk_levels(walker, pool, result, scope_paths, max_depth, max_commands)
    result.elapsed_seconds = time.monotonic() - started
    return result


def _walk_levels(
    walker: _Walker,
    pool: ThreadPoolExecutor,
    result: CliHelpResult,
    scopes: tuple[tuple[str, ...], ...],
    max_depth: int,
    max_commands: int,
) -> None:
    # One level at a time, each level in listing order, so that a max_commands cut is deterministic
    # and drops the deepest commands first.
    level: list[tuple[tuple[str, ...], str | None, str]] = [((), None, "")]
    seen: set[tuple[str, ...]] = {()}
    fetched_count = 0
    while level:
        room = max_commands - fetched_count
        if len(level) > room:
            skipped = level[room:]
            result.problems.append(
                SourceProblem(
                    walker.doc_path(skipped[0][0]),
                    f"max_commands={max_commands} reached: {len(skipped)} more commands not walked "
                    f"(first: {' '.join(skipped[0][0])})",
                )
            )
            level = level[:room]
        fetched_count += len(level)
        futures = [pool.submit(walker.fetch, path, parent, summary) for path, parent, summary in level]
        next_level: list[tuple[tuple[str, ...], str | None, str]] = []
        for (path, _, _), future in zip(level, futures, strict=True):
            fetched = future.result()
            result.problems.extend(fetched.problems)
            if fetched.command is None:
                continue
            names = [child for child, _ in fetched.children if _SAFE_WORD.fullmatch(child)]
            listed = list(fetched.children)
            # A scope is walked even when the listing omits it (git --help lists common commands only).
            listed += [(s[len(path)], "") for s in scopes if len(s) > len(path) and s[: len(path)] == path]
            for child, summary in listed:
                if not _SAFE_WORD.fullmatch(child):
                    result.problems.append(
                        SourceProblem(
                            walker.doc_path(path),
                            f"refused subcommand name {child!r}: not [A-Za-z0-9][A-Za-z0-9._:-]*, never run",
                        )
                    )
                    continue
                child_path = (*path, child)
                in_scope = not scopes or any(child_path[: len(s)] == s[: len(child_path)] for s in scopes)
                # "help" documents the help mechanism itself; walking it only repeats a page.
                if in_scope and child != "help" and len(child_path) <= max_depth and child_path not in seen:
                    seen.add(child_path)
                    next_level.append((child_path, fetched.text, summary))
            result.commands.append(replace(fetched.command, subcommands=list(dict.fromkeys(names))))
        level = next_level
