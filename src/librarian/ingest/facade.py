"""The ingest half of the :class:`~librarian.app.Librarian` facade: every way a source gets in.

Folders, files and git repositories (:meth:`IngestMethods.ingest`), what a connector lists (CLI
help, installed packages, OpenAPI documents) and websites. Each builds a source spec with its owner
and runs the ingest pipeline; the facade inherits these methods, so callers write ``lib.ingest(...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from librarian.config import Settings
from librarian.embeddings.cache import EmbeddingCache
from librarian.errors import InvalidInputError
from librarian.index.manager import VectorIndexManager
from librarian.ingest import connectors
from librarian.ingest.pipeline import IngestPipeline, IngestReport, ProgressCallback
from librarian.ingest.source_spec import required_version, source_spec
from librarian.ingest.sources.base import SourceListing
from librarian.ingest.sources.cli_help import DEFAULT_MAX_COMMANDS, DEFAULT_MAX_DEPTH
from librarian.ingest.sources.crawler import crawl_listing, known_page_validators, normalize_start_url
from librarian.ingest.sources.git import looks_like_git_url
from librarian.ingest.sources.git_access import GitAccess
from librarian.knowledge.access import Principal, SourceOwner, owner_for

__all__ = ["IngestMethods"]


class IngestMethods:
    """Ingest methods of the facade; :class:`~librarian.app.Librarian` provides what they use."""

    settings: Settings
    sessions: sessionmaker[Session]
    default_principal: Principal

    @property
    def cache(self) -> EmbeddingCache:
        """The embedding cache (the facade creates it on first use)."""
        raise NotImplementedError

    @property
    def vectors(self) -> VectorIndexManager:
        """The vector index manager (the facade creates it on first use)."""
        raise NotImplementedError

    def ingest(
        self,
        uri: str,
        *,
        sdk_name: str | None = None,
        sdk_version: str | None = None,
        ref: str | None = None,
        document_type: str | None = None,
        category: str | None = None,
        tags: tuple[str, ...] = (),
        progress: ProgressCallback | None = None,
        git_access: GitAccess | None = None,
        owner: SourceOwner | None = None,
    ) -> IngestReport:
        """Ingest a local file or folder, or a git repository (URL or local path with ``ref``).

        SDK documentation has ``sdk_name`` and ``sdk_version``; organisational documents have
        neither. Re-running on unchanged input only re-reads and hashes files.

        ``git_access`` is what git may use and reach for a git source asked for by someone other
        than the operator (an API caller); it is stored with the source, so refreshes keep it. By
        default: the operator's (its credentials, ssh, its own internal hosts).

        Raises:
            InvalidInputError: ``sdk_version`` without ``sdk_name``.
            NotFoundError: a local path that does not exist.
            BackendUnavailableError: a git repository that cannot be cloned.
        """
        if "\x00" in uri:
            raise InvalidInputError(f"{uri!r} cannot name a source: it contains a NUL byte")
        kind = "git" if ref is not None or looks_like_git_url(uri) else "local"
        normalized = (
            uri if kind == "git" and looks_like_git_url(uri) else str(Path(uri).expanduser().resolve())
        )
        options = (
            {"git_access": git_access.to_options()} if kind == "git" and git_access is not None else None
        )
        spec = source_spec(
            normalized,
            kind,
            ref,
            sdk_name,
            sdk_version,
            document_type,
            category,
            tags,
            options,
            self._owner(owner),
        )
        return IngestPipeline(self.settings, self.sessions, self.cache, self.vectors).run(spec, progress)

    def ingest_listing(
        self,
        uri: str,
        kind: str,
        lister: Callable[[], SourceListing],
        *,
        sdk_name: str | None = None,
        sdk_version: str | None = None,
        document_type: str | None = None,
        category: str | None = None,
        tags: tuple[str, ...] = (),
        options: dict[str, Any] | None = None,
        progress: ProgressCallback | None = None,
        owner: SourceOwner | None = None,
    ) -> IngestReport:
        """Ingest what a connector lists (CLI help, an installed package, an OpenAPI document).

        ``uri`` and ``kind`` identify the source (e.g. ``cli://aws`` and ``cli-help``); ``lister`` is
        called once to produce the listing, so a failure to list is recorded on the source.
        ``options`` is what the connector needs to run again; ``librarian refresh`` reads it.
        """
        spec = source_spec(
            uri, kind, None, sdk_name, sdk_version, document_type, category, tags, options, self._owner(owner)
        )
        pipeline = IngestPipeline(self.settings, self.sessions, self.cache, self.vectors)
        return pipeline.run(spec, progress, lister=lister)

    def ingest_openapi(
        self,
        location: str,
        *,
        sdk_name: str,
        sdk_version: str | None = None,
        allow_private: bool = False,
        progress: ProgressCallback | None = None,
        owner: SourceOwner | None = None,
    ) -> IngestReport:
        """Ingest an OpenAPI 3.x document (file or URL), one entity per operation.

        The version defaults to the document's ``info.version``. URLs that resolve to private or
        loopback addresses are refused unless ``allow_private``.
        """
        version, provenance, listing = connectors.openapi_listing(location, allow_private=allow_private)
        return self.ingest_listing(
            provenance,
            "openapi",
            lambda: listing,
            sdk_name=sdk_name,
            sdk_version=required_version(sdk_version or version, location),
            # An explicit version is kept on refresh; a detected one is detected again.
            options={"location": location, "allow_private": allow_private, "sdk_version": sdk_version},
            progress=progress,
            owner=owner,
        )

    def ingest_package(
        self,
        distribution: str,
        *,
        sdk_name: str | None = None,
        python: str | None = None,
        modules: tuple[str, ...] = (),
        levels: int | None = None,
        progress: ProgressCallback | None = None,
        owner: SourceOwner | None = None,
    ) -> IngestReport:
        """Ingest the public API of an installed Python distribution at its installed version.

        ``python`` names the interpreter of the environment to introspect (default: this one).
        ``modules`` documents only those modules, with ``levels`` of submodules below each (default:
        all): a separate source (``pypi://dist?modules=...``), so a later full ingest does not
        replace it.
        """
        version, listing = connectors.package_listing(
            distribution, python=python, modules=modules, levels=levels
        )
        query = (
            f"?modules={','.join(modules)}" + (f"&levels={levels}" if levels is not None else "")
            if modules
            else ""
        )
        return self.ingest_listing(
            f"pypi://{distribution}{query}",
            "python-package",
            lambda: listing,
            sdk_name=sdk_name or distribution,
            sdk_version=version,
            options={
                "distribution": distribution,
                "python": python,
                "modules": list(modules),
                "levels": levels,
            },
            progress=progress,
            owner=owner,
        )

    def ingest_cli(
        self,
        command: str,
        *,
        sdk_name: str,
        sdk_version: str | None = None,
        scopes: tuple[str, ...] = (),
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_commands: int = DEFAULT_MAX_COMMANDS,
        path: str | None = None,
        progress: ProgressCallback | None = None,
        owner: SourceOwner | None = None,
    ) -> IngestReport:
        """Ingest a CLI's help, one entity per command and subcommand, at the version it reports.

        ``path`` is the ``PATH`` to find and run the tool with (default: the interpreter's ``bin``
        directory, then this process's ``PATH``), so a tool installed in another environment is
        documented at the version installed there; a refresh runs it with the same ``PATH``.
        """
        version, listing = connectors.cli_listing(
            command, scopes=scopes, max_depth=max_depth, max_commands=max_commands, path=path
        )
        scope = f"?scope={','.join(sorted(scopes))}" if scopes else ""
        return self.ingest_listing(
            f"cli://{command}{scope}",
            "cli-help",
            lambda: listing,
            sdk_name=sdk_name,
            sdk_version=required_version(sdk_version or version, command),
            options={
                "command": command,
                "scopes": list(scopes),
                "max_depth": max_depth,
                "max_commands": max_commands,
                "sdk_version": sdk_version,
                "path": path,
            },
            progress=progress,
            owner=owner,
        )

    def crawl(
        self,
        url: str,
        *,
        sdk_name: str,
        sdk_version: str,
        max_pages: int | None = None,
        max_depth: int | None = None,
        scope: str | None = None,
        document_type: str | None = None,
        category: str | None = None,
        tags: tuple[str, ...] = (),
        progress: ProgressCallback | None = None,
        owner: SourceOwner | None = None,
    ) -> IngestReport:
        """Crawl a documentation website from ``url`` and ingest one document per page.

        The crawl stays under the start URL's directory (or ``scope``: a path prefix or URL), honours
        robots.txt and ``crawl_requests_per_second``, takes ``llms.txt`` links as extra seeds and stops
        at ``max_pages`` / ``max_depth`` (default: the ``crawl_max_pages`` / ``crawl_max_depth``
        settings). Pages stored by an earlier crawl of this source are requested conditionally
        (If-None-Match / If-Modified-Since): a 304 keeps them as stored. Loopback, private and
        link-local addresses are refused unless the ``allowed_private_hosts`` setting names them.

        Raises:
            InvalidInputError: not an http(s) URL, a refused address, a start URL outside ``scope``.
            BackendUnavailableError: the host cannot be resolved, or its robots.txt cannot be read.
        """
        start = normalize_start_url(url)
        settings = self.settings
        options: dict[str, Any] = {
            "start_url": start,
            "max_pages": max_pages,
            "max_depth": max_depth,
            "scope": scope,
        }
        spec = source_spec(
            start,
            "website",
            None,
            sdk_name,
            sdk_version,
            document_type,
            category,
            tags,
            options,
            self._owner(owner),
        )
        with self.sessions() as session:
            known = known_page_validators(session, spec.key)

        def lister() -> SourceListing:
            return crawl_listing(
                start,
                max_pages=max_pages or settings.crawl_max_pages,
                max_depth=settings.crawl_max_depth if max_depth is None else max_depth,
                requests_per_second=settings.crawl_requests_per_second,
                user_agent=settings.crawl_user_agent,
                allowed_private_hosts=settings.allowed_private_hosts,
                max_page_bytes=settings.max_file_bytes,
                scope=scope,
                known_pages=known,
                progress=progress,
            )

        return self.ingest_listing(
            start,
            "website",
            lister,
            sdk_name=sdk_name,
            sdk_version=sdk_version,
            document_type=document_type,
            category=category,
            tags=tags,
            options=options,
            progress=progress,
            owner=owner,
        )

    def _owner(self, owner: SourceOwner | None) -> SourceOwner | None:
        """The owner of a new source: as given, else the facade's caller (the operator: defaults)."""
        if owner is not None or self.default_principal.is_operator:
            return owner
        return owner_for(self.default_principal)
