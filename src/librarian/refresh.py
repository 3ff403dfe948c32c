"""Refreshing sources: run each source's ingest again, now (``librarian refresh``) or on a schedule.

Every source remembers how it was ingested (``sources.options``: a CLI's scopes and limits, a
package's interpreter, a crawl's start URL), so a refresh repeats the same connector with the same
limits. Refreshes are incremental because ingests are: unchanged files and entities are skipped by
content hash, changed ones re-chunked, deleted ones removed.

Versions. A folder, a git ref and a website keep the SDK version they were ingested as. A CLI, an
installed package and an OpenAPI document report their own version (unless the original ingest
pinned one, ``options["sdk_version"]``): when the tool was upgraded, the refresh ingests the new
version as a *new source* and keeps the old one, so research still answers for either. The old source
is then superseded: of the sources that share one recipe (kind, SDK name, options), only the one
ingested last is refreshed by the scheduler and by a refresh of several sources; refreshing the old
one by its id still works (and lands on the current version).

Schedule. A source is due ``refresh_interval_seconds`` (its own, else the setting) after its last
ingest; one never ingested is due at once, and one whose last run failed is retried after at most
:data:`FAILED_RETRY_SECONDS`, so a broken remote is neither hammered nor left for a day. Setting an
interval and the loop that refreshes what is due are in :mod:`librarian.refresh_schedule`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit
from urllib.request import url2pathname

from sqlalchemy import select

from librarian.app import Librarian
from librarian.errors import InvalidInputError, LibrarianError, NotFoundError
from librarian.ingest.pipeline import IngestReport, IngestStopped, ProgressCallback
from librarian.knowledge.access import LOCAL_ORGANIZATION_ID, Principal, SourceOwner, Visibility
from librarian.research.sdks import normal_form
from librarian.storage import repository
from librarian.storage.models import Source, as_utc

logger = logging.getLogger(__name__)

# A source whose last run failed is due again after this long at most (less if its interval is shorter).
FAILED_RETRY_SECONDS = 300
# The shortest interval a source may have; matches the lower bound of the setting.
MIN_INTERVAL_SECONDS = 60
# Kinds whose version comes from the thing itself, so a refresh may land on a new source.
REDETECTING_KINDS = frozenset({"cli-help", "python-package", "openapi"})
_FAILED_STATUSES = frozenset({"failed", "interrupted"})
_MIN_KEY_PREFIX = 6

T = TypeVar("T")


@dataclass(frozen=True)
class RefreshTarget:
    """A snapshot of one source: what a refresh repeats, and when it is due.

    ``interval_seconds`` is the effective interval (the source's own, else the setting's default).
    """

    id: int
    source_key: str
    uri: str
    kind: str
    ref: str | None
    sdk_name: str | None
    sdk_version: str | None
    document_type: str | None
    category: str | None
    tags: tuple[str, ...]
    options: dict[str, Any]
    interval_seconds: int
    own_interval: bool
    last_ingested_at: datetime | None
    last_status: str | None
    organization_id: int = LOCAL_ORGANIZATION_ID
    created_by: int | None = None
    visibility: str = Visibility.ORGANIZATION.value
    allowed_teams: tuple[int, ...] = ()

    @property
    def owner(self) -> SourceOwner:
        """Who owns the source and who may read it: a refresh (and a new version it finds) keeps both."""
        return SourceOwner(
            self.organization_id, self.created_by, Visibility(self.visibility), self.allowed_teams
        )

    @property
    def due_at(self) -> datetime | None:
        """When the scheduler should refresh this source next; ``None`` means now (never ingested)."""
        if self.last_ingested_at is None:
            return None
        delay = self.interval_seconds
        if self.last_status in _FAILED_STATUSES:
            delay = min(delay, FAILED_RETRY_SECONDS)
        return self.last_ingested_at + timedelta(seconds=delay)

    def is_due(self, now: datetime) -> bool:
        """Whether the source is due at ``now`` (aware UTC)."""
        due = self.due_at
        return due is None or due <= now

    @property
    def recipe(self) -> str:
        """What a refresh runs; sources sharing it are versions of one re-detecting connector."""
        return json.dumps([self.kind, self.sdk_name, recipe_options(self)], sort_keys=True, default=str)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (what ``librarian refresh --json`` shows about a source)."""
        due = self.due_at
        return {
            "id": self.id,
            "uri": self.uri,
            "kind": self.kind,
            "ref": self.ref,
            "sdk_name": self.sdk_name,
            "sdk_version": self.sdk_version,
            "refresh_interval_seconds": self.interval_seconds,
            "own_interval": self.own_interval,
            "last_ingested_at": self.last_ingested_at.isoformat() if self.last_ingested_at else None,
            "last_status": self.last_status,
            "due_at": due.isoformat() if due else None,
        }


@dataclass(frozen=True)
class RefreshOutcome:
    """What refreshing one source did.

    ``status`` is the ingest's (``ok``, ``unchanged``, ``partial``), ``failed`` (see ``error``), or
    ``skipped`` (superseded by a newer version of the same recipe; see ``note``). When a re-detecting
    connector found a new version, ``ingested_source_id`` and ``ingested_version`` name the new source.
    """

    source_id: int
    uri: str
    kind: str
    sdk_name: str | None
    sdk_version: str | None
    status: str
    seconds: float = 0.0
    report: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    ingested_source_id: int | None = None
    ingested_version: str | None = None
    note: str | None = None

    @property
    def new_version(self) -> bool:
        """Whether the refresh ingested a version other than the source's own (an upgrade)."""
        return self.ingested_source_id is not None and self.ingested_source_id != self.source_id

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {**asdict(self), "new_version": self.new_version}


# -- selecting ------------------------------------------------------------------------------------


def all_sources(lib: Librarian, principal: Principal | None = None) -> list[RefreshTarget]:
    """Every stored source ``principal`` (default: the facade's caller) may refresh, oldest first.

    Hand-written knowledge lives in sources of kind ``knowledge``, which have nothing to refresh.
    A principal may refresh the sources of its organisation that it created, or all of them as an
    administrator.
    """
    principal = principal or lib.default_principal
    with lib.sessions() as session:
        query = select(Source).where(Source.kind != repository.KNOWLEDGE_KIND).order_by(Source.id)
        if not principal.sees_everything and not principal.is_operator:
            query = query.where(Source.organization_id == principal.organization_id)
            if not principal.is_admin:
                query = query.where(Source.created_by == principal.user_id)
        rows = session.scalars(query)
        return [_target(row, lib.settings.refresh_interval_seconds) for row in rows]


def select_sources(
    lib: Librarian, selector: str | None, principal: Principal | None = None
) -> list[RefreshTarget]:
    """The sources ``selector`` names among those ``principal`` may refresh; ``None`` selects all.

    Rules, first match wins: a source id (``12``); a key prefix of at least six hex digits (the
    ``source_key`` column); a URI exactly as stored (``cli://aws?scope=s3``), or a local path that
    resolves to a stored folder or file; an SDK name or alias (``aws-cli`` = ``awscli``), which
    selects every version of that SDK.

    Raises:
        NotFoundError: nothing matches; the message names the selector.
        InvalidInputError: a key prefix matches several sources.
    """
    sources = all_sources(lib, principal)
    if selector is None:
        return sources
    wanted = selector.strip()
    if wanted.isdecimal():
        by_id = [s for s in sources if s.id == int(wanted)]
        if by_id:
            return by_id
    if len(wanted) >= _MIN_KEY_PREFIX and all(c in "0123456789abcdef" for c in wanted.lower()):
        by_key = [s for s in sources if s.source_key.startswith(wanted.lower())]
        if len(by_key) > 1:
            raise InvalidInputError(
                f"the key prefix {selector!r} matches {len(by_key)} sources",
                hint="give more characters of the key, or the source id from `librarian sources`",
            )
        if by_key:
            return by_key
    by_uri = [s for s in sources if s.uri == wanted] or [
        s for s in sources if s.kind in ("local", "git") and s.uri == _resolved_path(wanted)
    ]
    if by_uri:
        return by_uri
    by_sdk = [s for s in sources if s.sdk_name == wanted] or [
        s for s in sources if s.sdk_name is not None and normal_form(s.sdk_name) == normal_form(wanted)
    ]
    if by_sdk:
        return by_sdk
    raise NotFoundError(
        f"no source matches {selector!r}",
        hint="name a source by its id, key prefix, URI or SDK name, as `librarian sources` lists them",
    )


def due_sources(lib: Librarian, now: datetime | None = None) -> list[RefreshTarget]:
    """The sources due at ``now`` (default: the current time), the longest overdue first.

    A source is due when its last ingest plus its interval is at or before ``now``; never-ingested
    sources are due at once and failed ones after at most :data:`FAILED_RETRY_SECONDS`. Superseded
    versions of a re-detecting connector are left out (see the module docstring).
    """
    moment = as_utc(now) if now is not None else datetime.now(UTC)
    sources = all_sources(lib)
    superseded = _superseded(sources)
    due = [s for s in sources if s.id not in superseded and s.is_due(moment)]
    return sorted(due, key=lambda s: (s.due_at or datetime.min.replace(tzinfo=UTC), s.id))


# -- refreshing -----------------------------------------------------------------------------------


def refresh_sources(
    lib: Librarian,
    selector: str | None = None,
    *,
    due_only: bool = False,
    now: datetime | None = None,
    progress: ProgressCallback | None = None,
    on_outcome: Callable[[RefreshOutcome], None] | None = None,
) -> list[RefreshOutcome]:
    """Refresh the sources ``selector`` names (every source by default), one at a time.

    A source that fails is recorded on the source (``librarian sources`` shows why) and reported
    with status ``failed``; the others go on.

    Args:
        lib: the facade.
        selector: a source id, key prefix, URI or SDK name (see :func:`select_sources`).
        due_only: only the selected sources that are due at ``now``.
        now: the time that decides what is due (tests pass a fake clock); default the current time.
        progress: ``(stage, done, total)`` callback of each ingest.
        on_outcome: called with each outcome as soon as its source is done.

    Raises:
        NotFoundError: nothing matches ``selector``.
    """
    targets = select_sources(lib, selector)
    if due_only:
        due = {target.id for target in due_sources(lib, now)}
        targets = [target for target in targets if target.id in due]
    return refresh_targets(lib, targets, progress=progress, on_outcome=on_outcome)


def refresh_targets(
    lib: Librarian,
    targets: Iterable[RefreshTarget],
    *,
    progress: ProgressCallback | None = None,
    on_outcome: Callable[[RefreshOutcome], None] | None = None,
    stop: threading.Event | None = None,
) -> list[RefreshOutcome]:
    """Refresh ``targets`` in order, never letting one failure stop the rest.

    When several are given, superseded versions of a re-detecting connector are skipped (status
    ``skipped``), so each recipe runs once. ``stop``, when set, ends the loop between two sources.
    """
    chosen = list(targets)
    superseded = _superseded(chosen) if len(chosen) > 1 else {}
    outcomes = []
    for target in chosen:
        if stop is not None and stop.is_set():
            break
        if target.id in superseded:
            outcome = _outcome(
                target,
                "skipped",
                note=f"superseded by source {superseded[target.id]} (the same recipe, ingested later)",
            )
        else:
            outcome = refresh_one(lib, target, progress=progress)
        outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
    return outcomes


def refresh_one(
    lib: Librarian, target: RefreshTarget, *, progress: ProgressCallback | None = None
) -> RefreshOutcome:
    """Refresh one source; any error becomes a ``failed`` outcome, recorded on the source.

    This is the top-level handler of one refresh (the CLI, the scheduler and REST jobs all go
    through it), so it also catches unexpected errors: one broken source must not stop the others.
    """
    started = time.perf_counter()
    try:
        report = _run_connector(lib, target, progress)
    except LibrarianError as exc:
        _record_failure(lib, target, started_before=target.last_ingested_at, reason=str(exc))
        return _outcome(target, "failed", started=started, error=exc.to_dict())
    except IngestStopped:  # a cancelled job: stop every refresh, not just this one
        raise
    except Exception as exc:  # the top-level handler of one refresh: record it, go on with the next
        logger.exception("refreshing source %d (%s) failed unexpectedly", target.id, target.uri)
        _record_failure(lib, target, started_before=target.last_ingested_at, reason=repr(exc))
        error = {"error": True, "category": "internal", "message": repr(exc), "hint": None}
        return _outcome(target, "failed", started=started, error=error)
    ingested_id = report.source_id if report.source_id is not None else target.id
    ingested_version = target.sdk_version
    note = None
    if ingested_id != target.id:
        ingested_version = _carry_over(lib, target, ingested_id)
        note = (
            f"{target.kind} now reports version {ingested_version}: ingested as source {ingested_id}; "
            f"version {target.sdk_version} (source {target.id}) is kept"
            if ingested_version != target.sdk_version
            # e.g. an OpenAPI URL that now redirects elsewhere: same version, another identity
            else f"ingested as source {ingested_id}, whose URI differs; source {target.id} is kept"
        )
    return _outcome(
        target,
        report.status,
        started=started,
        report=report.to_dict(),
        ingested_source_id=ingested_id,
        ingested_version=ingested_version,
        note=note,
    )


def _run_connector(lib: Librarian, target: RefreshTarget, progress: ProgressCallback | None) -> IngestReport:
    """Run the ingest that made ``target`` again, with the options it was made with."""
    options = recipe_options(target)
    if target.kind in ("local", "git"):
        return lib.ingest(
            target.uri,
            sdk_name=target.sdk_name,
            sdk_version=target.sdk_version,
            ref=target.ref,
            document_type=target.document_type,
            category=target.category,
            tags=target.tags,
            progress=progress,
            owner=target.owner,
        )
    if target.kind == "cli-help":
        return lib.ingest_cli(
            _option(options, "command", str, target),
            sdk_name=_sdk_name(target),
            sdk_version=_pinned_version(options, target),
            scopes=tuple(_option(options, "scopes", list, target)),
            max_depth=_option(options, "max_depth", int, target),
            max_commands=_option(options, "max_commands", int, target),
            path=_optional(options, "path", str, target),
            progress=progress,
            owner=target.owner,
        )
    if target.kind == "python-package":
        return lib.ingest_package(
            _option(options, "distribution", str, target),
            sdk_name=_sdk_name(target),
            python=_optional(options, "python", str, target),
            modules=tuple(_optional(options, "modules", list, target) or ()),
            levels=_optional(options, "levels", int, target),
            progress=progress,
            owner=target.owner,
        )
    if target.kind == "openapi":
        return lib.ingest_openapi(
            _option(options, "location", str, target),
            sdk_name=_sdk_name(target),
            sdk_version=_pinned_version(options, target),
            allow_private=_option(options, "allow_private", bool, target),
            progress=progress,
            owner=target.owner,
        )
    if target.kind == "website":
        return lib.crawl(
            _option(options, "start_url", str, target),
            sdk_name=_sdk_name(target),
            sdk_version=_sdk_version(target),
            max_pages=_optional(options, "max_pages", int, target),
            max_depth=_optional(options, "max_depth", int, target),
            scope=_optional(options, "scope", str, target),
            document_type=target.document_type,
            category=target.category,
            tags=target.tags,
            progress=progress,
            owner=target.owner,
        )
    raise InvalidInputError(
        f"source {target.id} ({target.uri}) is of kind {target.kind!r}, which cannot be refreshed",
        hint="ingest it again with the command that created it",
    )


def recipe_options(target: RefreshTarget) -> dict[str, Any]:
    """The connector options of ``target``; sources stored before options existed get them from the URI.

    Sources ingested before migration 0003 have empty options; their URI still says what the
    connector needs (``cli://aws?scope=s3,s3api``, ``pypi://requests``, the OpenAPI document's URL).
    """
    if target.options or target.kind in ("local", "git"):
        return dict(target.options)
    parts = urlsplit(target.uri)
    if target.kind == "cli-help" and parts.scheme == "cli":
        scopes = parse_qs(parts.query).get("scope", [""])[0]
        return {
            "command": parts.netloc + parts.path,
            "scopes": [s for s in scopes.split(",") if s],
            "max_depth": 3,
            "max_commands": 2000,
        }
    if target.kind == "python-package" and parts.scheme == "pypi":
        return {"distribution": parts.netloc + parts.path, "python": None}
    if target.kind == "openapi":
        location = url2pathname(parts.path) if parts.scheme == "file" else target.uri
        return {"location": location, "allow_private": False}
    return {}


# -- helpers ----------------------------------------------------------------------------------------


def _target(row: Source, default_interval: int) -> RefreshTarget:
    return RefreshTarget(
        id=row.id,
        source_key=row.source_key,
        uri=row.uri,
        kind=row.kind,
        ref=row.ref,
        sdk_name=row.sdk_name,
        sdk_version=row.sdk_version,
        document_type=row.document_type,
        category=row.category,
        tags=tuple(row.tags or ()),
        options=dict(row.options or {}),
        interval_seconds=row.refresh_interval_seconds or default_interval,
        own_interval=row.refresh_interval_seconds is not None,
        last_ingested_at=as_utc(row.last_ingested_at),
        last_status=row.last_status,
        organization_id=row.organization_id,
        created_by=row.created_by,
        visibility=row.visibility,
        allowed_teams=tuple(row.allowed_teams or ()),
    )


def _superseded(targets: list[RefreshTarget]) -> dict[int, int]:
    """The ids of superseded sources among ``targets``, each with the id of the one superseding it.

    Of the re-detecting sources sharing a recipe, the one ingested last is current: a refresh of any
    of them lands on the version installed now, which is where the last ingest went.
    """
    groups: dict[str, list[RefreshTarget]] = {}
    for target in targets:
        if target.kind in REDETECTING_KINDS:
            groups.setdefault(target.recipe, []).append(target)
    superseded: dict[int, int] = {}
    for members in groups.values():
        newest = max(members, key=_recency)
        superseded.update((member.id, newest.id) for member in members if member.id != newest.id)
    return superseded


def _recency(target: RefreshTarget) -> tuple[datetime, int]:
    return (target.last_ingested_at or datetime.min.replace(tzinfo=UTC), target.id)


def _carry_over(lib: Librarian, old: RefreshTarget, new_id: int) -> str | None:
    """Give the new version's source the old one's own interval; return the new version."""
    with lib.sessions.begin() as session:
        new = session.get(Source, new_id)
        if new is None:
            return None
        if old.own_interval and new.refresh_interval_seconds is None:
            new.refresh_interval_seconds = old.interval_seconds
        return new.sdk_version


def _record_failure(
    lib: Librarian, target: RefreshTarget, *, started_before: datetime | None, reason: str
) -> None:
    """Record a failed refresh on the source, unless the ingest pipeline already did.

    Connectors fail before the pipeline runs when they cannot even tell the version (the tool was
    uninstalled), so nothing else would record it, and the scheduler would retry it every round.
    """
    with lib.sessions.begin() as session:
        row = session.get(Source, target.id)
        if row is None:
            return
        recorded = as_utc(row.last_ingested_at)
        pipeline_recorded = recorded is not None and (started_before is None or recorded > started_before)
        if pipeline_recorded and row.last_status in _FAILED_STATUSES:
            return
        repository.record_run(
            session,
            row,
            status="failed",
            errors=[{"path": target.uri, "reason": reason}],
            stats=dict(row.last_stats or {}),
            revision=None,
        )


def _outcome(
    target: RefreshTarget,
    status: str,
    *,
    started: float | None = None,
    **details: Any,
) -> RefreshOutcome:
    seconds = round(time.perf_counter() - started, 3) if started is not None else 0.0
    return RefreshOutcome(
        source_id=target.id,
        uri=target.uri,
        kind=target.kind,
        sdk_name=target.sdk_name,
        sdk_version=target.sdk_version,
        status=status,
        seconds=seconds,
        **details,
    )


def _option(options: dict[str, Any], name: str, kind: type[T], target: RefreshTarget) -> T:
    value = options.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidInputError(
            f"source {target.id} ({target.uri}) has no valid {name!r} in its stored options "
            f"(found {value!r})",
            hint="ingest it again with the command that created it, which stores the options anew",
        )
    return value


def _optional(options: dict[str, Any], name: str, kind: type[T], target: RefreshTarget) -> T | None:
    return None if options.get(name) is None else _option(options, name, kind, target)


def _pinned_version(options: dict[str, Any], target: RefreshTarget) -> str | None:
    """The version the original ingest forced (``--version``), else ``None``: ask the tool again."""
    return _optional(options, "sdk_version", str, target)


def _sdk_name(target: RefreshTarget) -> str:
    if not target.sdk_name:
        raise InvalidInputError(f"source {target.id} ({target.uri}) has no SDK name to refresh it under")
    return target.sdk_name


def _sdk_version(target: RefreshTarget) -> str:
    if not target.sdk_version:
        raise InvalidInputError(f"source {target.id} ({target.uri}) has no SDK version to refresh it under")
    return target.sdk_version


def _resolved_path(text: str) -> str:
    try:
        return str(Path(text).expanduser().resolve())
    except (OSError, RuntimeError):  # an unresolvable path is simply not a stored one
        return text
