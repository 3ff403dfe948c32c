"""Which sources a remote caller (REST, MCP) may add: the server's address and path policy.

The operator's CLI may ingest anything its user can read. A remote caller may not make the server
read its files or reach its internal network: local paths are accepted only inside allowed roots,
URLs only on public addresses (unless the operator allows private ones), ssh only when allowed, and
git never uses the server's credentials for them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from librarian.errors import InvalidInputError
from librarian.ingest.sources.git_access import GitAccess, check_ssh_source
from librarian.ingest.sources.remote import refuse_private_host

_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")


@dataclass(frozen=True)
class SourcePolicy:
    """What a remote caller may ask the server to ingest."""

    allowed_roots: tuple[Path, ...] = ()
    allow_private: bool = False
    allow_ssh: bool = False
    allowed_private_hosts: tuple[str, ...] = field(default=())

    @classmethod
    def of(
        cls,
        allowed_roots: Sequence[Path | str] = (),
        *,
        allow_private: bool = False,
        allow_ssh: bool = False,
        allowed_private_hosts: Sequence[str] = (),
    ) -> SourcePolicy:
        """A policy with ``allowed_roots`` resolved (symbolic links followed once, here)."""
        return cls(
            tuple(Path(root).expanduser().resolve() for root in allowed_roots),
            allow_private,
            allow_ssh,
            tuple(allowed_private_hosts),
        )

    def check(self, uri: str) -> str:
        """The URI to ingest if the policy accepts ``uri``; see :func:`check_source_uri`."""
        return check_source_uri(
            uri, self.allowed_roots, allow_private=self.allow_private, allow_ssh=self.allow_ssh
        )

    def git_access(self) -> GitAccess:
        """What git may use for a remote caller's source: never the server's credentials."""
        return GitAccess(
            credentials=False,
            ssh=self.allow_ssh,
            allow_private=self.allow_private,
            allowed_private_hosts=self.allowed_private_hosts,
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready, stored with a job so a resumed job is checked by the same rules."""
        return {
            "allowed_roots": [str(root) for root in self.allowed_roots],
            "allow_private": self.allow_private,
            "allow_ssh": self.allow_ssh,
            "allowed_private_hosts": list(self.allowed_private_hosts),
        }

    @classmethod
    def from_dict(cls, stored: object) -> SourcePolicy:
        """The policy :meth:`to_dict` stored; the strictest one when the record is unreadable."""
        if not isinstance(stored, dict):
            return cls()
        return cls(
            tuple(Path(str(root)) for root in stored.get("allowed_roots") or ()),
            stored.get("allow_private") is True,
            stored.get("allow_ssh") is True,
            tuple(str(host) for host in stored.get("allowed_private_hosts") or ()),
        )


def check_source_uri(
    uri: str, allowed_roots: Sequence[Path], *, allow_private: bool = False, allow_ssh: bool = False
) -> str:
    """``uri`` if ``POST /sources`` may ingest it: a remote git URL, or a path in an allowed root.

    An http(s) or ssh URL whose host resolves to a loopback, private or reserved address is refused
    unless ``allow_private``: the server must not become a way to read internal git servers for its
    callers. ssh URLs are refused unless ``allow_ssh``.

    Returns the URI to ingest (a local path resolved, ``file://`` removed).

    Raises:
        InvalidInputError: a local path outside every allowed root, an unsupported scheme, or a URL
            on a non-public address.
    """
    if any(ord(character) < 32 or ord(character) == 127 for character in uri):
        raise InvalidInputError(f"refusing {uri!r}: a source URI may not contain control characters")
    if uri.startswith(("http://", "https://")):
        if not allow_private:
            refuse_private_host(uri)
        return uri
    if uri.startswith("ssh://") or _SCP_LIKE.match(uri):
        if not allow_ssh:
            raise InvalidInputError(
                f"refusing {uri!r}: ssh git sources are not accepted by this server",
                hint="use the repository's https:// URL, or start the server with --allow-ssh-sources",
            )
        check_ssh_source(uri, GitAccess(credentials=False, allow_private=allow_private))
        return uri
    if uri.startswith("git://"):
        raise InvalidInputError(
            f"refusing {uri!r}: the unauthenticated git:// protocol is not accepted",
            hint="use the repository's https:// or ssh:// URL",
        )
    path = Path(uri.removeprefix("file://")).expanduser().resolve()
    for root in allowed_roots:
        if path.is_relative_to(root):
            return str(path)
    allowed = ", ".join(str(root) for root in allowed_roots) or "none are configured"
    raise InvalidInputError(
        f"refusing the local path {uri!r}: the server only reads local paths inside its allowed roots "
        f"({allowed})",
        hint="pass a git URL (https:// or ssh://), or start the server with this folder allowed",
    )
