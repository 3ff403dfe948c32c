"""The kinds of source an agent or a person may add from REST, MCP or the web UI, and their rules.

``auto`` is a git repository or a folder (the server's allowed roots). The other kinds reach the
connectors the CLI has:

- ``website``: a crawl of an http(s) documentation site; its address must be public unless the server
  allows private URLs (each page the crawler follows is checked again by the crawler itself);
- ``openapi``: an OpenAPI document by public http(s) URL or a file in an allowed root;
- ``cli``: the ``--help`` of a program installed on the server, walked command by command;
- ``package``: the API of a Python distribution installed on the server.

The last two run programs on the server (the tool, the introspection of an installed package), so
they need an administrator, and the name must be a bare program or distribution name, never a path
or a command line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from librarian.catalog.policy import SourcePolicy
from librarian.errors import InvalidInputError
from librarian.ingest.sources.cli_help import DEFAULT_MAX_COMMANDS, DEFAULT_MAX_DEPTH
from librarian.ingest.sources.remote import refuse_private_host
from librarian.knowledge.access import Principal, Scope, SourceOwner

if TYPE_CHECKING:
    from librarian.app import Librarian
    from librarian.catalog.jobs import IngestRequest
    from librarian.config import Settings

__all__ = ["SOURCE_KINDS", "check_request", "run_request"]

SOURCE_KINDS = ("auto", "website", "openapi", "cli", "package")
# A program on the server's PATH or an installed distribution: a name, nothing a shell would read.
_BARE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
Progress = Callable[[str, int, int], None]


def check_request(
    principal: Principal, request: IngestRequest, policy: SourcePolicy, settings: Settings
) -> IngestRequest:
    """The request to run, after the rules of its kind; refusals name the field and what is allowed.

    A walk's limits are the caller's to lower, not to raise: a website crawl stays within the
    server's ``crawl_max_pages`` and ``crawl_max_depth``, a CLI walk within the CLI defaults.

    Raises:
        InvalidInputError: an unknown kind, a missing field, a refused address or name.
        ForbiddenError: ``cli`` or ``package`` without an administrator.
    """
    kind = request.kind
    if kind not in SOURCE_KINDS:
        raise InvalidInputError(f"kind: {kind!r} is not one of {', '.join(SOURCE_KINDS)}")
    _check_limits(request, settings)
    if kind == "auto":
        return replace(request, uri=policy.check(request.uri))
    if not request.sdk_name:
        raise InvalidInputError(f"sdk_name: a {kind} source needs the name of what it documents")
    if kind == "website":
        if not request.sdk_version:
            raise InvalidInputError("sdk_version: a website source needs the version it documents")
        return replace(request, uri=_public_url(request.uri, policy, "a website"))
    if kind == "openapi":
        if request.uri.startswith(("http://", "https://")):
            return replace(request, uri=_public_url(request.uri, policy, "an OpenAPI document"))
        return replace(request, uri=policy.check(request.uri))
    principal.require(Scope.ADMIN, f"indexing a {'program' if kind == 'cli' else 'package'} of the server")
    if not _BARE_NAME.match(request.uri):
        what = "program" if kind == "cli" else "distribution"
        raise InvalidInputError(
            f"uri: {request.uri[:80]!r} is not a {what} name",
            hint=f"give the bare name of a {what} installed on the server, e.g. "
            + ("git or aws" if kind == "cli" else "requests"),
        )
    return request


# The most a remote caller may ask of a CLI walk: the walk's own defaults.
MAX_CLI_DEPTH = DEFAULT_MAX_DEPTH
MAX_CLI_COMMANDS = DEFAULT_MAX_COMMANDS


def _check_limits(request: IngestRequest, settings: Settings) -> None:
    """Refuse limits that do not apply to the kind, or that ask for more than the server allows."""
    bounds = {
        "website": {"max_pages": settings.crawl_max_pages, "max_depth": settings.crawl_max_depth},
        "cli": {"max_depth": MAX_CLI_DEPTH, "max_commands": MAX_CLI_COMMANDS},
    }.get(request.kind, {})
    for name in ("max_pages", "max_depth", "max_commands"):
        value = getattr(request, name)
        if value is None:
            continue
        if name not in bounds:
            raise InvalidInputError(f"{name}: does not apply to a {request.kind} source")
        low = 0 if name == "max_depth" else 1
        if not low <= value <= bounds[name]:
            raise InvalidInputError(f"{name}: use {low} to {bounds[name]} (the server's limit), not {value}")
    if request.scope is not None and request.kind != "website":
        raise InvalidInputError(f"scope: only a website crawl has one, not a {request.kind} source")


def run_request(
    lib: Librarian, request: IngestRequest, policy: SourcePolicy, owner: SourceOwner, progress: Progress
) -> dict[str, Any]:
    """Ingest ``request`` (already checked) with the connector of its kind; the ingest report."""
    if request.kind == "website":
        assert request.sdk_name and request.sdk_version  # checked on submission
        report = lib.crawl(
            request.uri,
            sdk_name=request.sdk_name,
            sdk_version=request.sdk_version,
            max_pages=request.max_pages,
            max_depth=request.max_depth,
            scope=request.scope,
            document_type=request.document_type,
            category=request.category,
            tags=request.tags,
            progress=progress,
            owner=owner,
        )
    elif request.kind == "openapi":
        assert request.sdk_name
        report = lib.ingest_openapi(
            request.uri,
            sdk_name=request.sdk_name,
            sdk_version=request.sdk_version,
            allow_private=policy.allow_private,
            progress=progress,
            owner=owner,
        )
    elif request.kind == "cli":
        assert request.sdk_name
        report = lib.ingest_cli(
            request.uri,
            sdk_name=request.sdk_name,
            sdk_version=request.sdk_version,
            scopes=request.scopes,
            max_depth=DEFAULT_MAX_DEPTH if request.max_depth is None else request.max_depth,
            max_commands=DEFAULT_MAX_COMMANDS if request.max_commands is None else request.max_commands,
            progress=progress,
            owner=owner,
        )
    elif request.kind == "package":
        report = lib.ingest_package(request.uri, sdk_name=request.sdk_name, progress=progress, owner=owner)
    else:
        report = lib.ingest(
            request.uri,
            sdk_name=request.sdk_name,
            sdk_version=request.sdk_version,
            ref=request.ref,
            document_type=request.document_type,
            category=request.category,
            tags=request.tags,
            progress=progress,
            git_access=policy.git_access(),
            owner=owner,
        )
    return report.to_dict()


def _public_url(uri: str, policy: SourcePolicy, what: str) -> str:
    if not uri.startswith(("http://", "https://")):
        raise InvalidInputError(f"uri: {what} is fetched over http(s), not {uri[:80]!r}")
    if not policy.allow_private:
        refuse_private_host(uri, allowed_private_hosts=policy.allowed_private_hosts)
    return uri
