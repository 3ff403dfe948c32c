"""Connectors that build documents themselves, turned into listings the ingest pipeline takes.

Each function fetches or introspects first (so the SDK version is known: from the spec, the installed
distribution or the tool itself) and returns that version with the listing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from librarian.ingest.sources.base import SourceListing
from librarian.ingest.sources.cli_help import (
    DEFAULT_MAX_COMMANDS,
    DEFAULT_MAX_DEPTH,
    cli_documents,
    walk_cli_help,
)
from librarian.ingest.sources.openapi import fetch_openapi, load_openapi, openapi_documents
from librarian.ingest.sources.pypackage import introspect_distribution, package_documents


def openapi_listing(location: str, *, allow_private: bool = False) -> tuple[str | None, str, SourceListing]:
    """The operations of an OpenAPI document: ``(info.version, provenance URL, listing)``."""
    data, provenance = fetch_openapi(location, allow_private=allow_private)
    spec = load_openapi(data, provenance)
    version, documents = openapi_documents(spec, base_url=provenance)
    return version, provenance, SourceListing(root=Path("."), files=[], problems=[], documents=documents)


def package_listing(
    distribution: str,
    *,
    python: str | None = None,
    modules: Sequence[str] = (),
    levels: int | None = None,
) -> tuple[str, SourceListing]:
    """The public API of an installed distribution: ``(installed version, listing)``.

    ``modules`` limits the walk to those modules (and ``levels`` of submodules below each).
    """
    result = introspect_distribution(
        distribution, python=python or sys.executable, modules=list(modules) or None, levels=levels
    )
    return result.version, SourceListing(
        root=Path("."), files=[], problems=list(result.problems), documents=package_documents(result)
    )


def cli_listing(
    command: str,
    *,
    scopes: Sequence[str] = (),
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_commands: int = DEFAULT_MAX_COMMANDS,
    path: str | None = None,
) -> tuple[str | None, SourceListing]:
    """The help of a CLI and its subcommands: ``(version the tool reports, listing)``.

    ``path`` is the ``PATH`` the tool is looked up and run with (a virtualenv's ``bin`` first, say),
    so the help indexed is that of the installation a task runs.
    """
    result = walk_cli_help(
        command,
        scopes=scopes,
        max_depth=max_depth,
        max_commands=max_commands,
        env={"PATH": path} if path else None,
    )
    return result.version, SourceListing(
        root=Path("."),
        files=[],
        problems=list(result.problems),
        documents=cli_documents(result, command=command),
    )
