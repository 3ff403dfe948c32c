"""``api_caller``: one HTTP request with httpx, refusing internal addresses unless they are allow-listed.

Payload: ``url`` (http or https), optional ``method`` (default GET), ``headers``, ``params``, ``json``
or ``data`` (a text body), ``timeout_seconds`` and ``expect.status`` (an int or a list of ints; default:
any 2xx counts as success). Redirects are not followed: a 3xx is the answer, so a public host cannot
bounce the call to an internal one.

Hosts that resolve to loopback, private, link-local or other non-public addresses are refused by the
shared guard of :mod:`librarian.ingest.sources.remote`, unless the host name or every address it
resolves to is in the allow-list (``Settings.allowed_private_hosts``: names, addresses or CIDR
networks). The address actually connected to is checked again, against DNS rebinding.
"""

from __future__ import annotations

import ipaddress
import json
import math
import socket
import time
from collections.abc import Sequence
from typing import Any

import httpx

from librarian.errors import BackendUnavailableError, InvalidInputError, LibrarianError
from librarian.ingest.sources.remote import refuse_private_host
from librarian.runtime.contracts import ExecutionResult, TaskSpec, Workspace
from librarian.runtime.executors.base import (
    PayloadError,
    expect,
    failure,
    field,
    from_error,
    string_map,
    success,
    where,
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class AddressRefusedError(InvalidInputError):
    """The URL's host is (or resolves to) a non-public address that is not allow-listed."""


class HostAllowList:
    """Host names and networks an api_caller task may reach although they are not public.

    Args:
        entries: host names (``localhost``, ``minio.internal``), addresses (``127.0.0.1``) or CIDR
            networks (``10.0.0.0/8``).
    """

    def __init__(self, entries: Sequence[str] = ()) -> None:
        self.names: set[str] = set()
        self.networks: list[IPNetwork] = []
        for entry in entries:
            try:
                self.networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                self.names.add(entry.strip().lower().rstrip("."))

    def allows_name(self, host: str) -> bool:
        """Whether ``host`` is allow-listed by name."""
        return host.lower().rstrip(".") in self.names

    def allows_address(self, address: str) -> bool:
        """Whether ``address`` lies in an allow-listed network."""
        ip = _ip(address)
        return any(ip in network for network in self.networks)


class ApiCaller:
    """Sends the task's HTTP request.

    Args:
        allowed_hosts: see :class:`HostAllowList`.
        timeout_seconds: default time limit of each network operation (the payload may set its own).
        max_body_bytes: response bytes kept; the rest is cut (and the body is then not parsed as JSON).
        transport: an httpx transport; the default one ignores proxy variables, so the address
            check sees the real peer.
    """

    executor_type: str = "api_caller"

    def __init__(
        self,
        *,
        allowed_hosts: Sequence[str] = (),
        timeout_seconds: float = 30.0,
        max_body_bytes: int = 1_000_000,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.allow = HostAllowList(allowed_hosts)
        self.timeout_seconds = timeout_seconds
        self.max_body_bytes = max_body_bytes
        self.transport = transport

    def execute(self, task: TaskSpec, workspace: Workspace) -> ExecutionResult:
        """Send the request; ``ok`` when the status is the expected one (any 2xx by default)."""
        started = time.monotonic()
        try:
            request = self._request(task)
            expected = _expected_status(task)
            timeout = field(task, "timeout_seconds", (int, float))
            timeout = self.timeout_seconds if timeout is None else timeout
            if not (math.isfinite(timeout) and timeout > 0):
                raise PayloadError(f"{where(task)}: payload field 'timeout_seconds' must be positive")
            self._check_host(request.url)
            output = self._send(request, float(timeout))
        except LibrarianError as exc:
            return from_error(exc, details={"url": str(task.payload.get("url"))})
        except httpx.TimeoutException as exc:
            return failure(
                "TimeoutError",
                f"{task.payload.get('method', 'GET')} {task.payload.get('url')} timed out: {exc}",
                details={"url": str(task.payload.get("url"))},
                duration_seconds=time.monotonic() - started,
            )
        except httpx.RequestError as exc:
            return failure(
                type(exc).__name__,
                f"{task.payload.get('method', 'GET')} {task.payload.get('url')} failed: {exc}",
                details={"url": str(task.payload.get("url"))},
                duration_seconds=time.monotonic() - started,
            )
        duration = time.monotonic() - started
        status = output["status_code"]
        summary = f"{request.method} {request.url} answered {status} {output['reason']}"
        if not _status_matches(status, expected):
            excerpt = output["body"][:500]
            return failure(
                "HTTPStatusError",
                f"{summary}, expected {_describe_expected(expected)}" + (f": {excerpt}" if excerpt else ""),
                details={
                    "status_code": status,
                    "url": str(request.url),
                    "method": request.method,
                    "body": excerpt,
                },
                output=output,
                duration_seconds=duration,
            )
        return success(
            f"{summary} in {duration:.2f}s", stdout=output["body"], output=output, duration_seconds=duration
        )

    def _request(self, task: TaskSpec) -> httpx.Request:
        url = field(task, "url", str, required=True)
        method = (field(task, "method", str) or "GET").upper()
        if method not in _METHODS:
            raise PayloadError(f"{where(task)}: unsupported HTTP method {method!r}")
        if "json" in task.payload and "data" in task.payload:
            raise PayloadError(f"{where(task)}: give either 'json' or 'data' as the body, not both")
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise PayloadError(f"{where(task)}: {url!r} is not a valid URL: {exc}") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise PayloadError(f"{where(task)}: only http(s) URLs with a host can be called, got {url!r}")
        kwargs: dict[str, Any] = {
            "headers": string_map(task, "headers"),
            "params": string_map(task, "params"),
        }
        if "json" in task.payload:
            kwargs["json"] = task.payload["json"]
        elif "data" in task.payload:
            kwargs["content"] = field(task, "data", str)
        return httpx.Request(method, parsed, **kwargs)

    def _check_host(self, url: httpx.URL) -> None:
        host = url.host
        if self.allow.allows_name(host):
            return
        if self.allow.networks:
            addresses = _resolve(url)
            if all(self.allow.allows_address(address) for address in addresses):
                return
        try:
            refuse_private_host(str(url))
        except InvalidInputError as exc:
            raise AddressRefusedError(
                exc.message,
                hint="add the host or its network to allowed_private_hosts if the task may reach it",
            ) from exc

    def _send(self, request: httpx.Request, timeout: float) -> dict[str, Any]:
        transport = self.transport or httpx.HTTPTransport()
        with httpx.Client(transport=transport, timeout=timeout, trust_env=False) as client:
            response = client.send(request, stream=True, follow_redirects=False)
            try:
                self._check_peer(response, request.url)
                body, truncated = _read_capped(response, self.max_body_bytes)
            finally:
                response.close()
        text = body.decode(response.encoding or "utf-8", errors="replace")
        parsed: Any = None
        if not truncated and "json" in response.headers.get("content-type", ""):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None  # the validator reports a missing JSON body if a check needs one
        return {
            "status_code": response.status_code,
            "reason": response.reason_phrase,
            "url": str(request.url),
            "headers": dict(response.headers),
            "body": text,
            "body_truncated": truncated,
            "json": parsed,
        }

    def _check_peer(self, response: httpx.Response, url: httpx.URL) -> None:
        if self.allow.allows_name(url.host):
            return
        stream = response.extensions.get("network_stream")
        peer = stream.get_extra_info("server_addr") if stream is not None else None
        if not (isinstance(peer, tuple) and peer):
            return
        address = str(peer[0])
        if not (self.allow.allows_address(address) or _ip(address).is_global):
            raise AddressRefusedError(
                f"refused to call {url}: the connection reached {address}, a non-public address",
                hint="add the host or its network to allowed_private_hosts if the task may reach it",
            )


def _resolve(url: httpx.URL) -> set[str]:
    host = url.raw_host.decode("ascii")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError) as exc:
        raise BackendUnavailableError(f"cannot resolve {host} (calling {url}): {exc}") from exc


def _ip(address: str) -> IPAddress:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped  # ::ffff:127.0.0.1 is the IPv4 loopback
    return ip


def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        room = limit - size
        chunks.append(chunk[:room])
        size += min(len(chunk), room)
        if len(chunk) > room:
            return b"".join(chunks), True
    return b"".join(chunks), False


def _expected_status(task: TaskSpec) -> list[int] | None:
    status = expect(task).get("status")
    if status is None:
        return None
    values = status if isinstance(status, list) else [status]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise PayloadError(f"{where(task)}: 'expect.status' must be an integer or a list of integers")
    return values


def _status_matches(status: int, expected: list[int] | None) -> bool:
    return 200 <= status < 300 if expected is None else status in expected


def _describe_expected(expected: list[int] | None) -> str:
    return "a 2xx status" if expected is None else " or ".join(map(str, expected))
