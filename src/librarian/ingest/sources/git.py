"""A git repository (local path or URL) checked out at a ref (tag, branch or commit).

Clones are kept under ``<home>/git`` and fetched again on later runs, so a refresh transfers only
what changed; the listed revision is the checked-out commit, which lets an unchanged repository be
skipped without reading a file. git runs without a shell, without prompts, with only the transport
the source needs, and under the source's :class:`~librarian.ingest.sources.git_access.GitAccess`:
redirects checked hop by hop and its host pinned to checked addresses, credentials only for the
operator's own sources.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.ingest.sources.base import SourceListing
from librarian.ingest.sources.git_access import OPERATOR, GitAccess, GitTransport, git_transport
from librarian.ingest.sources.local import list_local

_URL_SCHEMES = ("http://", "https://", "ssh://", "git://", "file://")
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")


def looks_like_git_url(uri: str) -> bool:
    """True for URLs git understands (``https://…``, ``git@host:path``, ``*.git``)."""
    return uri.startswith(_URL_SCHEMES) or bool(_SCP_LIKE.match(uri)) or uri.endswith(".git")


class GitCheckout:
    """Keeps one clone per repository URI in ``cache_dir`` and checks out refs in it."""

    def __init__(self, cache_dir: Path, timeout_seconds: float = 300.0, access: GitAccess = OPERATOR) -> None:
        self._cache_dir = cache_dir
        self._timeout = timeout_seconds
        self._access = access
        self._transport: GitTransport | None = None

    def list(self, uri: str, ref: str | None) -> SourceListing:
        """Clone or fetch ``uri``, check out ``ref`` (default: the remote's default branch), list files.

        Raises:
            InvalidInputError: the URI is malformed, refused by the source's access (a transport or
                address it does not allow, a redirect to a non-public address) or the ref does not exist.
            BackendUnavailableError: the repository cannot be cloned or fetched.
        """
        if uri.startswith("-"):
            raise InvalidInputError(f"git URI {uri!r} may not start with '-'")
        parts = urlsplit(uri)
        if parts.password is not None or (parts.scheme in {"http", "https"} and parts.username is not None):
            raise InvalidInputError(
                "git URLs with credentials are refused: the URL becomes the provenance of every chunk",
                hint="use an SSH key or a git credential helper, and pass the URL without user-info",
            )
        # One checkout per (repository, ref), so two refs ingested at once never share a work tree.
        key = hashlib.sha256(f"{uri}\x1f{ref or ''}".encode()).hexdigest()[:24]
        checkout = self._cache_dir / key
        self._transport = git_transport(
            uri, self._access, git_home=self._cache_dir / ".home", timeout=min(self._timeout, 30.0)
        )
        url = self._transport.url
        if (checkout / ".git").is_dir():
            # The checked URL, every time: the repository may redirect elsewhere since the clone.
            self._git(checkout, "remote", "set-url", "origin", "--", url, what="set the remote URL")
            self._git(checkout, "fetch", "--quiet", "--tags", "--force", "origin", what=f"fetch {uri}")
        else:
            self._cache_dir.mkdir(parents=True, exist_ok=True)
            self._git(
                None, "clone", "--quiet", "--no-checkout", "--", url, str(checkout), what=f"clone {uri}"
            )
        target = self._resolve_ref(checkout, ref, uri)
        self._git(checkout, "checkout", "--quiet", "--force", "--detach", target, what=f"check out {ref}")
        revision = self._git(checkout, "rev-parse", "HEAD", what="read HEAD").strip()
        listing = list_local(checkout, url_prefix=f"{uri}@{revision}")
        listing.revision = revision
        return listing

    def _resolve_ref(self, checkout: Path, ref: str | None, uri: str) -> str:
        if ref is None:
            return "origin/HEAD" if self._has_ref(checkout, "origin/HEAD") else "FETCH_HEAD"
        if ref.startswith("-"):
            raise InvalidInputError(f"git ref {ref!r} may not start with '-'")
        for candidate in (f"refs/tags/{ref}", f"origin/{ref}", ref):
            if self._has_ref(checkout, candidate):
                return candidate
        raise InvalidInputError(
            f"ref {ref!r} does not exist in {uri}", hint="pass a tag, branch or commit of that repository"
        )

    def _has_ref(self, checkout: Path, ref: str) -> bool:
        result = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            capture_output=True,
            env=self._env(),
            timeout=self._timeout,
            check=False,
        )
        return result.returncode == 0

    def _env(self) -> dict[str, str]:
        assert self._transport is not None, "list() sets the transport before git runs"
        return self._transport.env

    def _git(self, checkout: Path | None, *args: str, what: str) -> str:
        command = ["git", "-c", "core.hooksPath=/dev/null", "-c", "credential.helper="]
        for setting in self._transport.config if self._transport is not None else ("protocol.allow=never",):
            command += ["-c", setting]
        if checkout is not None:
            command += ["-C", str(checkout)]
        try:
            result = subprocess.run(
                [*command, *args],
                capture_output=True,
                text=True,
                env=self._env(),
                timeout=self._timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BackendUnavailableError(f"git could not {what} within {self._timeout:.0f} s") from exc
        except FileNotFoundError as exc:
            raise BackendUnavailableError("git is not installed", hint="install git") from exc
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip().splitlines()
            raise BackendUnavailableError(f"git could not {what}: {' '.join(message[-3:])}")
        return result.stdout


def version_from_ref(ref: str) -> str:
    """The version a tag names: ``v2.15.0`` -> ``2.15.0``; other refs are kept as labels (``main``)."""
    name = ref.removeprefix("refs/tags/")
    return name[1:] if re.match(r"^[vV]\d", name) else name
