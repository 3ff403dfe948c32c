"""The identity, labels and owner of an ingest source, from what a caller of the facade gave."""

from __future__ import annotations

from typing import Any

from librarian.errors import InvalidInputError
from librarian.knowledge.access import SourceOwner
from librarian.storage import repository


def source_spec(
    uri: str,
    kind: str,
    ref: str | None,
    sdk_name: str | None,
    sdk_version: str | None,
    document_type: str | None,
    category: str | None,
    tags: tuple[str, ...],
    options: dict[str, Any] | None = None,
    owner: SourceOwner | None = None,
) -> repository.SourceSpec:
    """The identity and labels of a source; SDK docs default to ``sdk_reference``, others ``document``."""
    if sdk_version is not None and sdk_name is None:
        raise InvalidInputError("--version needs --sdk: a version belongs to an SDK")
    return repository.SourceSpec(
        uri=uri,
        kind=kind,
        ref=ref,
        sdk_name=sdk_name,
        sdk_version=sdk_version,
        document_type=document_type or ("sdk_reference" if sdk_name else "document"),
        category=category,
        tags=tuple(tags),
        options=dict(options or {}),
        organization_id=(owner or SourceOwner()).organization_id,
        created_by=(owner or SourceOwner()).created_by,
        visibility=None if owner is None or owner.visibility is None else owner.visibility.value,
        allowed_teams=(owner or SourceOwner()).allowed_teams,
    )


def required_version(version: str | None, what: str) -> str:
    """``version``, or an error saying the version of ``what`` could not be told."""
    if not version:
        raise InvalidInputError(f"cannot tell the version of {what}", hint="pass it with --version")
    return version
