"""Fetching a document from a local path or an http(s) URL without becoming a proxy to private networks.

Hosts that resolve to loopback, private, link-local, reserved or other non-public addresses are refused
unless explicitly allowed (all of them with ``allow_private``, or the hosts and networks of an
:class:`AllowList`, the ``allowed_private_hosts`` setting); every redirect target and the connected
peer are checked again.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from librarian.errors import BackendUnavailableError, InvalidInputError, NotFoundError

MAX_DOCUMENT_BYTES = 10 * 1024 * 1024
MAX_REDIRECTS = 5

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class AllowList:
    """Non-public hosts and networks that may be fetched all the same (``allowed_private_hosts``).

    A host name entry allows whatever that name resolves to (the operator trusts the name); an IP
    address or CIDR network entry allows matching addresses whatever name led to them.

    Example:
        >>> allowed = AllowList.parse(["127.0.0.0/8", "docs.internal"])
        >>> allowed.allows("localhost", "127.0.0.1"), allowed.allows("x", "10.0.0.1")
        (True, False)
    """

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        """Read entries such as ``127.0.0.1``, ``[::1]``, ``10.0.0.0/8`` or ``docs.internal``.

        Raises:
            InvalidInputError: an entry is empty, or contains ``/`` without being a CIDR network.
        """
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip().lower()
            bare = entry[1:-1] if entry.startswith("[") and entry.endswith("]") else entry
            try:
                networks.append(ipaddress.ip_network(bare, strict=False))
                continue
            except ValueError:
                pass
            if not bare or "/" in bare or any(c.isspace() for c in bare):
                raise InvalidInputError(
                    f"allowed_private_hosts entry {raw!r} is neither a host name, an IP address "
                    "nor a CIDR network",
                    hint="use entries such as 127.0.0.1, 10.0.0.0/8, [::1] or docs.internal",
                )
            hosts.add(bare.rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def allows(self, host: str, address: str) -> bool:
        """Whether ``address``, reached through the name ``host``, is allowed despite being non-public."""
        if host.lower().rstrip(".").strip("[]") in self.hosts:
            return True
        ip = _ip(address)
        return any(ip in network for network in self.networks)


def fetch_document(
    location: str,
    *,
    allow_private: bool = False,
    allowed_private_hosts: Sequence[str] = (),
    timeout: float = 30.0,
    max_bytes: int = MAX_DOCUMENT_BYTES,
) -> tuple[bytes, str]:
    """Read a document from a local path or an http(s) URL, refusing non-public addresses.

    Hosts that resolve to loopback, private, link-local, reserved or other non-public addresses are
    refused unless ``allow_private`` is true, so a shared server cannot be made to read internal
    services. Redirects are followed (at most :data:`MAX_REDIRECTS`), each target checked again.

    Args:
        location: a file path or an ``http://``/``https://`` URL.
        allow_private: permit non-public addresses (a spec served on the local network).
        allowed_private_hosts: non-public hosts, addresses or CIDR networks permitted all the same.
        timeout: seconds allowed for each network operation.
        max_bytes: larger documents are refused while streaming.

    Returns:
        The bytes and the provenance: the final URL (after redirects), or the file's ``file://`` URI.

    Raises:
        InvalidInputError: malformed or refused URL, unsupported scheme, too many redirects, too large,
            an HTTP error other than not-found or server-side.
        NotFoundError: the file does not exist, or the server answered 404/410.
        BackendUnavailableError: DNS, connection or timeout failure, or a 5xx/429 answer.
    """
    if "://" not in location:
        return _read_file(Path(location), max_bytes)
    url = parse_http_url(location, location)
    allowed = AllowList.parse(allowed_private_hosts)
    # An explicit transport disables environment proxies: the address check must see the real peer.
    with httpx.Client(transport=httpx.HTTPTransport(), timeout=timeout) as client:
        for _ in range(MAX_REDIRECTS + 1):
            if not allow_private:
                check_host(url, location, allowed)
            try:
                with client.stream(
                    "GET", url, headers={"Accept": "application/json, application/yaml, */*"}
                ) as response:
                    if not allow_private:
                        check_peer(response, url, location, allowed)
                    if response.is_redirect:
                        url = parse_http_url(str(response.url.join(response.headers["location"])), location)
                        continue
                    _check_status(response, location)
                    return read_body(response, max_bytes, location), str(response.url)
            except httpx.TimeoutException as exc:
                raise BackendUnavailableError(f"timed out after {timeout}s: {_where(url, location)}") from exc
            except httpx.RequestError as exc:
                raise BackendUnavailableError(f"cannot fetch {_where(url, location)}: {exc}") from exc
    raise InvalidInputError(
        f"{location} redirects more than {MAX_REDIRECTS} times", hint="pass the final URL"
    )


def _read_file(path: Path, max_bytes: int) -> tuple[bytes, str]:
    try:
        resolved = path.expanduser().resolve(strict=True)
        if not resolved.is_file():
            raise InvalidInputError(f"{path} is not a regular file", hint="pass an OpenAPI JSON or YAML file")
        with resolved.open("rb") as handle:
            data = handle.read(max_bytes + 1)  # +1 tells "exactly at the limit" from "over it"
    except FileNotFoundError as exc:
        raise NotFoundError(f"{path} does not exist", hint="pass an existing file or an http(s) URL") from exc
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symbolic link loop
        raise InvalidInputError(f"cannot read {path}: {exc}") from exc
    if len(data) > max_bytes:
        raise InvalidInputError(f"{path} is over the {max_bytes:,}-byte limit for an OpenAPI document")
    return data, resolved.as_uri()


def parse_http_url(raw: str, location: str) -> httpx.URL:
    """``raw`` as an http(s) URL without its fragment; ``location`` is what the user gave (for errors).

    Raises:
        InvalidInputError: not a URL, not http(s), no host, or credentials in the URL.
    """
    try:
        url = httpx.URL(raw)
    except httpx.InvalidURL as exc:
        raise InvalidInputError(f"{_where(raw, location)} is not a valid URL: {exc}") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise InvalidInputError(
            f"{_where(raw, location)}: only http(s) URLs with a host can be fetched",
            hint="pass an http:// or https:// URL, or a local file path",
        )
    if url.userinfo:
        raise InvalidInputError(
            f"{_where(url, location)}: URLs with credentials are refused, they would become provenance",
            hint="serve the document without credentials or download it and pass the file",
        )
    return url.copy_with(fragment=None)


def refuse_private_host(location: str, *, allowed_private_hosts: Sequence[str] = ()) -> None:
    """Raise unless every address the host of ``location`` (an http(s) URL) resolves to is public.

    For callers that hand a URL to another program (git) instead of fetching it here. Hosts,
    addresses and CIDR networks in ``allowed_private_hosts`` pass although non-public.

    Raises:
        InvalidInputError: a malformed URL, or a host on a loopback, private or reserved address.
        BackendUnavailableError: the host name cannot be resolved.
    """
    check_host(parse_http_url(location, location), location, AllowList.parse(allowed_private_hosts))


def check_host(url: httpx.URL, location: str, allowed: AllowList | None = None) -> None:
    """Raise unless every address ``url``'s host resolves to is public or allowed by ``allowed``.

    Checked before connecting; :func:`check_peer` checks the address actually connected to.

    Raises:
        InvalidInputError: the host has a refused address (the message names ``url`` and it).
        BackendUnavailableError: the host name cannot be resolved.
    """
    host = url.raw_host.decode("ascii")  # IDNA-encoded, so getaddrinfo sees what httpx will dial
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError) as exc:
        raise BackendUnavailableError(f"cannot resolve {host} (fetching {location}): {exc}") from exc
    for address in sorted(addresses):
        _check_address(address, url, location, allowed)


def check_peer(
    response: httpx.Response, url: httpx.URL, location: str, allowed: AllowList | None = None
) -> None:
    """Raise if the address ``response`` came from is refused (against DNS rebinding).

    Raises:
        InvalidInputError: the connected peer is non-public and not allowed.
    """
    stream = response.extensions.get("network_stream")
    peer = stream.get_extra_info("server_addr") if stream is not None else None
    if isinstance(peer, tuple) and peer:
        _check_address(str(peer[0]), url, location, allowed)


_check_peer = check_peer  # its former private name, which tests/ingest/test_openapi.py imports


def _ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped  # ::ffff:127.0.0.1 reaches the IPv4 loopback
    return ip


def _check_address(address: str, url: httpx.URL, location: str, allowed: AllowList | None) -> None:
    ip = _ip(address)
    problems = (
        (ip.is_unspecified, "unspecified"), (ip.is_loopback, "loopback"), (ip.is_link_local, "link-local"),
        (ip.is_multicast, "multicast"), (ip.is_private, "private"), (ip.is_reserved, "reserved"),
        (not ip.is_global, "non-public"),
    )  # fmt: skip
    problem = next((word for flagged, word in problems if flagged), None)
    if problem is not None and not (allowed is not None and allowed.allows(url.host, address)):
        resolved = address if url.host == address else f"{url.host} resolves to {address}, which"
        raise InvalidInputError(
            f"refused to fetch {_where(url, location)}: {resolved} is a {problem} address",
            hint="non-public addresses are refused to protect internal services; "
            "allow private addresses explicitly only for a host you trust "
            "(setting allowed_private_hosts, e.g. 127.0.0.1 or 10.0.0.0/8)",
        )


def _check_status(response: httpx.Response, location: str) -> None:
    status, where = response.status_code, _where(response.url, location)
    if status in (404, 410):
        raise NotFoundError(f"{where} answered HTTP {status}: no document there", hint="check the URL")
    if status >= 500 or status == 429:
        raise BackendUnavailableError(f"{where} answered HTTP {status}", hint="try again later")
    if status >= 300:
        raise InvalidInputError(f"{where} answered HTTP {status} {response.reason_phrase}")


def read_body(response: httpx.Response, max_bytes: int, location: str) -> bytes:
    """The decoded body of a streamed ``response``, refused once it passes ``max_bytes``.

    Raises:
        InvalidInputError: the body (declared or read) is over ``max_bytes``, naming the URL.
    """
    too_large = f"{_where(response.url, location)} is over the {max_bytes:,}-byte limit"
    declared = response.headers.get("content-length", "")
    if declared.isdecimal() and int(declared) > max_bytes:
        raise InvalidInputError(too_large)
    chunks: list[bytes] = []
    size = 0
    # Decoded bytes are counted, so a compressed body cannot expand past the limit either.
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise InvalidInputError(too_large)
        chunks.append(chunk)
    return b"".join(chunks)


def _where(url: httpx.URL | str, location: str) -> str:
    """The URL at fault, and the one the user gave when a redirect led elsewhere."""
    return location if str(url) == location.split("#", 1)[0] else f"{url} (reached from {location})"
