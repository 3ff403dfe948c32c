"""What git may reach and use for one source: addresses checked on every hop, pinned, and no borrowed keys.

A git URL from an API caller is untrusted: the server must not become a way to read internal git
servers, nor offer its own credentials to a host the caller chose. Checking the URL as given is not
enough (a public server answering ``302`` to ``http://127.0.0.1:8081/internal.git`` was followed by
git; a host name can resolve to another address when git dials it). So for http(s):

- redirects are followed here, not by git: each hop's address is checked before connecting and the
  address actually connected to after (:func:`~librarian.ingest.sources.remote.check_host`,
  :func:`~librarian.ingest.sources.remote.check_peer`); git then runs on the final URL with
  ``http.followRedirects=false`` and its host pinned to the checked addresses
  (``http.curloptResolve``), so neither a redirect nor a second DNS answer can move it;
- a source's own host may be private only when the caller allows it (the operator's internal git
  server), and a redirect may never lead from a public address to a non-public one.

For ssh (``ssh://`` and ``user@host:path``) the host's addresses are checked the same way, and API
callers may use ssh only when the operator allows it. Without ``credentials``, git runs with an empty
``HOME`` of its own (no ``.netrc``, credential helpers or ssh configuration of the server), no ssh
agent, and an ssh that offers no key. Only the transports a source needs are enabled.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.ingest.sources.remote import (
    MAX_REDIRECTS,
    AllowList,
    check_host,
    check_peer,
    parse_http_url,
)

__all__ = ["API_CALLER", "OPERATOR", "GitAccess", "check_ssh_source", "git_transport"]

_SCP_LIKE = re.compile(r"^(?:[\w.+-]+@)?(?P<host>\[[^\]]+\]|[\w.-]+):(?!//)")
_INFO_REFS = "/info/refs"


@dataclass(frozen=True)
class GitAccess:
    """What git may use and reach for one source.

    Attributes:
        credentials: the server's own ``HOME`` (``.netrc``, credential helpers, ssh configuration),
            keys and ssh agent. True for the operator's sources, never for an API caller's.
        ssh: ssh URLs are accepted.
        allow_private: non-public addresses: ``True`` allowed, ``False`` refused, ``None`` allowed
            only when the source's own host is one (an internal server the operator named), never
            reached through a redirect from a public one.
        allowed_private_hosts: non-public hosts, addresses or networks allowed all the same.
    """

    credentials: bool = True
    ssh: bool = True
    allow_private: bool | None = None
    allowed_private_hosts: tuple[str, ...] = ()

    def to_options(self) -> dict[str, Any]:
        """The access as a source's stored option (a refresh runs with it again)."""
        return {**asdict(self), "allowed_private_hosts": list(self.allowed_private_hosts)}

    @classmethod
    def from_options(cls, options: object) -> GitAccess:
        """The access stored by :meth:`to_options`; the operator's when there is none."""
        if not isinstance(options, dict):
            return OPERATOR
        return cls(
            credentials=options.get("credentials") is True,
            ssh=options.get("ssh") is True,
            allow_private=options.get("allow_private")
            if isinstance(options.get("allow_private"), bool)
            else None,
            allowed_private_hosts=tuple(str(host) for host in options.get("allowed_private_hosts") or ()),
        )


OPERATOR = GitAccess()
API_CALLER = GitAccess(credentials=False, ssh=False, allow_private=False)


@dataclass(frozen=True)
class GitTransport:
    """How to run git for one URL: the URL to use, ``-c`` settings, and the environment."""

    url: str
    config: tuple[str, ...]
    env: dict[str, str]


def git_transport(uri: str, access: GitAccess, *, git_home: Path, timeout: float) -> GitTransport:
    """Check ``uri`` under ``access`` and say how git must run for it.

    Args:
        uri: the source: an http(s) or ssh URL, ``user@host:path``, or a local path.
        access: what this source's caller may use.
        git_home: an empty directory used as ``HOME`` when git runs without credentials.
        timeout: seconds for each redirect probe.

    Raises:
        InvalidInputError: a refused transport or address, or a redirect to a non-git URL.
        BackendUnavailableError: a host that cannot be resolved or reached while probing.
    """
    protocols = ["protocol.allow=never"]
    pins: list[str] = []
    url = uri
    if uri.startswith(("http://", "https://")):
        url, pins = _follow_http(uri, access, timeout)
        protocols += ["protocol.http.allow=always", "protocol.https.allow=always"]
    elif uri.startswith("ssh://") or _SCP_LIKE.match(uri):
        if not access.ssh:
            raise InvalidInputError(
                f"refusing {uri!r}: ssh git sources are not accepted from API callers",
                hint="use the repository's https:// URL, or start the server with --allow-ssh-sources",
            )
        check_ssh_source(uri, access)
        protocols.append("protocol.ssh.allow=always")
    elif "://" in uri and not uri.startswith("file://"):
        raise InvalidInputError(f"refusing {uri!r}: only http(s), ssh and local git repositories are read")
    else:
        protocols.append("protocol.file.allow=always")  # a local repository (a path or file://)
    config = (*protocols, "http.followRedirects=false", *(f"http.curloptResolve={pin}" for pin in pins))
    return GitTransport(url=url, config=config, env=_environment(access, git_home))


def _follow_http(uri: str, access: GitAccess, timeout: float) -> tuple[str, list[str]]:
    """The repository URL after redirects (each hop checked), and the pins of its host."""
    base = parse_http_url(uri, uri)
    allowed = AllowList.parse(access.allowed_private_hosts)
    private_ok = access.allow_private if access.allow_private is not None else _is_private(base)
    with httpx.Client(transport=httpx.HTTPTransport(), timeout=timeout, follow_redirects=False) as client:
        for _ in range(MAX_REDIRECTS + 1):
            if not private_ok:
                check_host(base, uri, allowed)
            probe = base.copy_with(path=base.path.rstrip("/") + _INFO_REFS, query=b"service=git-upload-pack")
            try:
                with client.stream("GET", probe) as response:
                    if not private_ok:
                        check_peer(response, probe, uri, allowed)
                    location = response.headers.get("location") if response.is_redirect else None
            except httpx.TimeoutException as exc:
                raise BackendUnavailableError(f"timed out after {timeout}s reaching {base}") from exc
            except httpx.RequestError as exc:
                raise BackendUnavailableError(f"cannot reach {base} (for {uri}): {exc}") from exc
            if location is None:
                return str(base), _pins(base, allowed, private_ok, uri)
            base = _repository_url(probe.join(location), uri)
    raise InvalidInputError(f"{uri} redirects more than {MAX_REDIRECTS} times", hint="pass the final URL")


def _repository_url(target: httpx.URL, uri: str) -> httpx.URL:
    """The repository a redirect of ``.../info/refs`` leads to (git strips the same suffix)."""
    url = parse_http_url(str(target), uri)
    if not url.path.endswith(_INFO_REFS):
        raise InvalidInputError(f"{uri} redirects to {url}, which is not a git repository URL")
    return url.copy_with(path=url.path[: -len(_INFO_REFS)], query=None)


def _is_private(url: httpx.URL) -> bool:
    """Whether ``url``'s own host has a non-public address (the operator named an internal server)."""
    try:
        check_host(url, str(url))
    except InvalidInputError:
        return True
    return False


def _pins(url: httpx.URL, allowed: AllowList, private_ok: bool, uri: str) -> list[str]:
    """``HOST:PORT:ADDRESS,...`` for curl: git dials exactly the addresses checked here."""
    host = url.raw_host.decode("ascii")
    if _is_address(host):
        return []
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise BackendUnavailableError(f"cannot resolve {host} (for {uri}): {exc}") from exc
    addresses = sorted({str(info[4][0]) for info in infos})
    if not private_ok:
        for address in addresses:
            check_host(url.copy_with(host=address), uri, allowed)
    shown = ",".join(f"[{a}]" if ":" in a else a for a in addresses)
    return [f"{host}:{port}:{shown}"]


def check_ssh_source(uri: str, access: GitAccess) -> None:
    """Refuse an ssh source whose host has a non-public address the access does not allow.

    Raises:
        InvalidInputError: the host has a refused address.
        BackendUnavailableError: the host name cannot be resolved.
    """
    if uri.startswith("ssh://"):
        host = httpx.URL(uri.replace("ssh://", "http://", 1)).host
    else:
        match = _SCP_LIKE.match(uri)
        assert match is not None
        host = match["host"].strip("[]")
    if access.allow_private is True or not host:
        return
    check_host(httpx.URL(f"http://{_bracketed(host)}/"), uri, AllowList.parse(access.allowed_private_hosts))


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _environment(access: GitAccess, git_home: Path) -> dict[str, str]:
    """git's environment: no prompts, no user or system configuration, credentials only if allowed."""
    keep = {"PATH", "LANG"} | ({"HOME", "SSH_AUTH_SOCK"} if access.credentials else set())
    env = {key: value for key, value in os.environ.items() if key in keep}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_ASKPASS="/bin/true",
    )
    if not access.credentials:
        git_home.mkdir(parents=True, exist_ok=True, mode=0o700)
        env["HOME"] = str(git_home)
        env["GIT_SSH_COMMAND"] = (
            "ssh -F /dev/null -o BatchMode=yes -o IdentityAgent=none -o IdentitiesOnly=yes "
            f"-o IdentityFile=/dev/null -o StrictHostKeyChecking=accept-new "
            f"-o UserKnownHostsFile={git_home / 'known_hosts'}"
        )
    return env
