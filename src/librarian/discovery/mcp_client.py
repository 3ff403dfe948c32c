"""Talking to an MCP server from synchronous code: a command over stdio or a streamable HTTP URL.

The importer (list the tools) and the caller (call one) open the server the same way: the spec or
binding is validated field by field, the session is opened with the official MCP SDK inside
``anyio.run``, and the whole exchange (start, ``initialize``, the request) has one deadline,
``tools_call_timeout_seconds``. Whatever goes wrong (a missing command, a server that exits, hangs or
answers nonsense) becomes a :class:`~librarian.errors.LibrarianError` naming the server and the step.

A stdio server is started with a minimal environment: ``PATH`` and ``LANG`` of this process, a
``HOME`` in a fresh temporary directory, and the spec's own ``env``; Librarian's own secrets (database
URLs, API keys, tokens) are never inherited. (The SDK also passes ``LOGNAME``, ``SHELL``, ``TERM`` and
``USER``, which hold no secrets.) A URL's host must be public unless it is in
``allowed_private_hosts``, the policy of every other outbound request; the address connected to is
checked again, against DNS rebinding.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import shlex
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO, TypeVar, cast

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from librarian.config import Settings
from librarian.discovery.calling import ToolCallError
from librarian.errors import InvalidInputError, LibrarianError
from librarian.ingest.sources.remote import AllowList, parse_http_url, refuse_private_host

T = TypeVar("T")

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_SERVER_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
SPEC_FIELDS = ("command", "env", "cwd", "url", "headers", "name")
BINDING_FIELDS = ("transport", "command", "env", "cwd", "url", "headers", "tool")
MAX_STDERR_CHARS = 600


class McpServerError(ToolCallError):
    """An MCP server could not be started, reached, or did not answer in time."""


@dataclass(frozen=True)
class McpServer:
    """How to reach one MCP server: a command (stdio) or a URL (streamable HTTP)."""

    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "http" if self.url else "stdio"

    @property
    def label(self) -> str:
        """The server as error messages name it: ``MCP server `mcp-server-time```."""
        if self.url:
            return f"MCP server {self.url}"
        shown = shlex.join([Path(self.command[0]).name, *self.command[1:]])
        return f"MCP server `{shown if len(shown) <= 120 else shown[:117] + '...'}`"

    def binding(self) -> dict[str, Any]:
        """The fields a tool's binding needs to reach this server again."""
        if self.url:
            return {"transport": self.transport, "url": self.url, "headers": dict(self.headers)}
        found: dict[str, Any] = {
            "transport": self.transport,
            "command": list(self.command),
            "env": dict(self.env),
        }
        if self.cwd is not None:
            found["cwd"] = self.cwd
        return found


def server_name(given: str) -> str:
    """A server name usable as the first part of a ``toolId``: ``mcp-servers/everything`` becomes
    ``mcp-servers-everything``."""
    return _SERVER_NAME.sub("-", given).strip("-._")[:100] or "mcp"


def parse_server(
    given: Mapping[str, Any], settings: Settings, *, origin: str, allowed: tuple[str, ...] = SPEC_FIELDS
) -> McpServer:
    """A validated :class:`McpServer` from a source spec or a tool binding.

    Args:
        given: ``{"command": [...], "env": {...}, "cwd": ...}`` or ``{"url": ..., "headers": {...}}``.
        settings: for ``allowed_private_hosts``.
        origin: what ``given`` is, for messages (``MCP source spec``, ``tool time.x binding``).
        allowed: the field names ``given`` may hold.

    Raises:
        InvalidInputError: the first field at fault, by name; a URL on a non-public address that
            ``allowed_private_hosts`` does not allow.
        BackendUnavailableError: the URL's host name cannot be resolved.
    """
    if not isinstance(given, Mapping):
        raise InvalidInputError(f"{origin}: must be an object with a 'command' or a 'url'")
    unknown = sorted(str(key) for key in given if key not in allowed)
    if unknown:
        raise InvalidInputError(
            f"{origin}: unknown field {', '.join(map(repr, unknown))}",
            hint=f"an MCP source has {', '.join(allowed)}",
        )
    command, url = given.get("command"), given.get("url")
    if (command is None) == (url is None):
        raise InvalidInputError(
            f"{origin}: give either 'command' (a server started over stdio) or 'url' (streamable HTTP)",
            hint='e.g. {"command": ["mcp-server-time"]} or {"url": "https://host/mcp"}',
        )
    expected = "stdio" if url is None else "http"
    if given.get("transport") not in (None, expected):
        raise InvalidInputError(
            f"{origin}: transport: {given.get('transport')!r} does not match "
            f"{'command' if url is None else 'url'} (a {expected} server)"
        )
    if url is not None:
        for name in ("env", "cwd"):
            if given.get(name) is not None:
                raise InvalidInputError(f"{origin}: {name}: only a server started by 'command' has one")
        headers = _headers(given.get("headers"), origin)
        return McpServer(url=_url(url, settings, origin), headers=headers)  # resolved last: it is slow
    if given.get("headers") is not None:
        raise InvalidInputError(f"{origin}: headers: only a server reached by 'url' has them")
    return McpServer(
        command=_command(command, origin),
        env=_env(given.get("env"), origin),
        cwd=_cwd(given.get("cwd"), origin),
    )


def _command(value: Any, origin: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as exc:
            raise InvalidInputError(f"{origin}: command: cannot be split into words: {exc}") from exc
    if not isinstance(value, list | tuple) or not value or not all(isinstance(part, str) for part in value):
        raise InvalidInputError(
            f"{origin}: command: must be a non-empty list of strings",
            hint='e.g. ["mcp-server-time", "--local-timezone", "UTC"]',
        )
    if not value[0].strip():
        raise InvalidInputError(f"{origin}: command[0]: the program to run is empty")
    if any("\0" in part for part in value):
        raise InvalidInputError(f"{origin}: command: holds a NUL character")
    return tuple(value)


def _env(value: Any, origin: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{origin}: env: must be an object of names to strings")
    for name, text in value.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise InvalidInputError(f"{origin}: env: {name!r} is not a valid environment variable name")
        if not isinstance(text, str) or "\0" in text:
            raise InvalidInputError(f"{origin}: env.{name}: must be a string without NUL characters")
    return dict(value)


def _cwd(value: Any, origin: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{origin}: cwd: must be a directory path")
    if not Path(value).is_dir():
        raise InvalidInputError(f"{origin}: cwd: {value} is not a directory")
    return value


def _url(value: Any, settings: Settings, origin: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{origin}: url: must be an http(s) URL such as https://host/mcp")
    try:
        url = str(parse_http_url(value.strip(), value.strip()))
        refuse_private_host(url, allowed_private_hosts=tuple(settings.allowed_private_hosts))
    except InvalidInputError as exc:
        raise InvalidInputError(f"{origin}: url: {exc.message}", hint=exc.hint) from exc
    return url


def _headers(value: Any, origin: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{origin}: headers: must be an object of header names to strings")
    for name, text in value.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise InvalidInputError(f"{origin}: headers: {name!r} is not a valid header name")
        if not isinstance(text, str) or any(c in text for c in "\r\n\0"):
            raise InvalidInputError(f"{origin}: headers.{name}: must be a string on one line")
    return dict(value)


@dataclass
class Progress:
    """The step the exchange has reached, for the message of a timeout or a failure."""

    step: str = "start"
    # The first line the server wrote that is not a JSON-RPC message (a log line on stdout...).
    stray: str | None = None

    def suffix(self, errlog: IO[str]) -> str:
        """What the server printed that explains a failure, as a message suffix."""
        stray = f"; it wrote what is not an MCP message: {self.stray}" if self.stray else ""
        return stray + _stderr(errlog)


Work = Callable[[ClientSession, types.InitializeResult, Progress], Awaitable[T]]


def with_session(server: McpServer, settings: Settings, work: Work[T]) -> T:
    """Open a session with ``server``, initialise it and run ``work`` on it, all within the deadline.

    ``work(session, initialize_result, progress)`` sets ``progress.step`` to the request it sends
    (``tools/list``), so a timeout names it.

    Raises:
        InvalidInputError: the command does not exist or cannot be run.
        McpServerError: the server could not be reached, exited, answered an error or nonsense,
            or did not answer within ``tools_call_timeout_seconds``; the message names the server,
            the step and the end of the server's stderr.
    """
    timeout = settings.tools_call_timeout_seconds
    allowed = AllowList.parse(settings.allowed_private_hosts)
    progress = Progress()
    with (
        tempfile.TemporaryDirectory(prefix="librarian-mcp-", ignore_cleanup_errors=True) as home,
        tempfile.TemporaryFile("w+") as errlog,
    ):

        async def note_stray(message: IncomingMessage) -> None:
            if isinstance(message, Exception) and progress.stray is None:
                progress.stray = _stray(message)
            await anyio.lowlevel.checkpoint()

        async def main() -> T:
            with anyio.fail_after(timeout):
                async with AsyncExitStack() as stack:
                    transport = (
                        _http(server, allowed, timeout) if server.url else _stdio(server, home, errlog)
                    )
                    read, write = await stack.enter_async_context(transport)
                    session = await stack.enter_async_context(
                        ClientSession(read, write, message_handler=note_stray)
                    )
                    progress.step = "initialize"
                    initialized = await session.initialize()
                    return await work(session, initialized, progress)

        try:
            return _run_sync(main)
        except TimeoutError as exc:
            raise McpServerError(
                f"{server.label}: did not answer {progress.step} within {timeout:g} s"
                + progress.suffix(errlog),
                hint="check that it is an MCP server (stdio for a command, streamable HTTP for a URL); "
                "raise tools_call_timeout_seconds if it is only slow",
            ) from exc
        except BaseExceptionGroup as group:
            leaf = _leaf(group)
            if leaf is None:
                raise  # an interrupt, not a failure of the server
            raise _failure(server, progress, leaf, errlog) from group
        # A server's protocol stack fails in these ways; each becomes an error naming the server.
        except (
            LibrarianError,
            MCPError,
            OSError,
            httpx2.HTTPError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            anyio.EndOfStream,
            RuntimeError,  # an unsupported protocol version, an unexpected result kind
            ValueError,  # a result that does not validate
        ) as exc:
            raise _failure(server, progress, exc, errlog) from exc


def _run_sync(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main`` on a new event loop, in a worker thread when this thread already runs one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(main)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="librarian-mcp") as pool:
        return pool.submit(anyio.run, main).result()


@asynccontextmanager
async def _stdio(server: McpServer, home: str, errlog: IO[str]) -> AsyncIterator[TransportStreams]:
    """The server's command started with a minimal environment, in a temporary home."""
    environment = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": home,
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        **server.env,
    }
    parameters = StdioServerParameters(
        command=server.command[0], args=list(server.command[1:]), env=environment, cwd=server.cwd or home
    )
    started = False
    try:
        async with stdio_client(parameters, errlog=cast(TextIO, errlog)) as streams:
            started = True
            yield streams
    except FileNotFoundError as exc:
        if started:
            raise
        raise InvalidInputError(
            f"{server.label}: cannot start it: {server.command[0]!r} was not found",
            hint="give the program's full path, or install it on the server's PATH",
        ) from exc
    except PermissionError as exc:
        if started:
            raise
        raise InvalidInputError(
            f"{server.label}: cannot start it: {server.command[0]!r} is not executable"
        ) from exc


@asynccontextmanager
async def _http(server: McpServer, allowed: AllowList, timeout: float) -> AsyncIterator[TransportStreams]:
    """The SDK's streamable HTTP transport over a client that checks the address it reached."""

    async def check_peer(response: httpx2.Response) -> None:
        stream = response.extensions.get("network_stream")
        peer = stream.get_extra_info("server_addr") if stream is not None else None
        if not (isinstance(peer, tuple) and peer):
            return
        ip = ipaddress.ip_address(str(peer[0]).split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if not ip.is_global and not allowed.allows(response.request.url.host, str(ip)):
            raise InvalidInputError(
                f"{server.label}: the connection reached {ip}, a non-public address",
                hint="add the host or its network to allowed_private_hosts if it may be reached",
            )

    async with (
        httpx2.AsyncClient(
            headers=server.headers,
            timeout=httpx2.Timeout(timeout),
            trust_env=False,  # no proxy from the environment: the peer check must see the server itself
            event_hooks={"response": [check_peer]},
        ) as client,
        streamable_http_client(server.url or "", http_client=client) as streams,
    ):
        yield streams


def _leaf(group: BaseExceptionGroup[BaseException]) -> Exception | None:
    """The first real error in a (nested) exception group, preferring ours; ``None`` if none is."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    if any(isinstance(leaf, KeyboardInterrupt | SystemExit) for leaf in leaves):
        return None
    errors = [leaf for leaf in leaves if isinstance(leaf, Exception)]
    return next(
        (error for error in errors if isinstance(error, LibrarianError)), errors[0] if errors else None
    )


def _failure(server: McpServer, progress: Progress, exc: BaseException, errlog: IO[str]) -> LibrarianError:
    """``exc`` as an error naming the server, the step, and what the server printed."""
    if isinstance(exc, LibrarianError):
        return exc
    step, printed = progress.step, progress.suffix(errlog)
    if isinstance(exc, TimeoutError):
        return McpServerError(f"{server.label}: did not answer {step} in time{printed}")
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED:
            return McpServerError(
                f"{server.label}: closed the connection during {step} (did it exit?){printed}",
                hint="run the command by hand to see why it stops",
            )
        return McpServerError(f"{server.label}: answered {step} with an error: {exc.message}")
    if isinstance(exc, httpx2.HTTPStatusError):
        return McpServerError(f"{server.label}: answered {step} with HTTP {exc.response.status_code}")
    if isinstance(exc, httpx2.HTTPError | OSError):
        return McpServerError(f"{server.label}: cannot be reached ({step}): {exc}")
    if isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError | anyio.EndOfStream):
        return McpServerError(f"{server.label}: the connection broke during {step} (did it exit?){printed}")
    return McpServerError(f"{server.label}: {step} failed: {type(exc).__name__}: {exc}{printed}")


def _stray(exc: Exception) -> str:
    """The line a server wrote that failed to parse (pydantic keeps it), else the error's first line."""
    if isinstance(exc, ValidationError) and exc.errors():
        return repr(exc.errors()[0].get("input"))[:200]
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _stderr(errlog: IO[str]) -> str:
    """The end of what the server wrote to stderr, as a message suffix (empty when it wrote nothing)."""
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read()
    except (OSError, ValueError):
        return ""
    tail = text.strip()[-MAX_STDERR_CHARS:]
    return f"; its stderr ends: {tail}" if tail else ""
