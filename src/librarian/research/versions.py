"""Version resolution: exact, prefix (``2.15``), ranges (``>=2,<3``, ``2.x``), ``latest``, labels.

A version that is not indexed is never silently replaced: the resolution says which indexed version
it used instead and why, and search then filters on that one version only.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


def _parse(version: str) -> Version | None:
    try:
        return Version(version)
    except InvalidVersion:
        return None


def sort_versions(versions: list[str]) -> list[str]:
    """Newest first: PEP 440-comparable versions by value, then labels (``main``) alphabetically."""
    comparable: list[tuple[Version, str]] = []
    labels: list[str] = []
    for version in set(versions):
        parsed = _parse(version)
        if parsed is None:
            labels.append(version)
        else:
            comparable.append((parsed, version))
    comparable.sort(reverse=True)
    return [version for _, version in comparable] + sorted(labels)


@dataclass(frozen=True)
class VersionResolution:
    """The indexed version a request resolved to; ``note`` explains any substitution."""

    requested: str | None
    resolved: str | None
    exact: bool
    note: str


def resolve_version(requested: str | None, indexed: list[str]) -> VersionResolution:
    """Pick the indexed version for ``requested`` (``indexed`` sorted newest first)."""
    if not indexed:
        return VersionResolution(requested, None, False, "no version of this SDK is indexed")
    if requested is None or requested.strip().lower() in {"", "latest", "*", "newest"}:
        return VersionResolution(requested, indexed[0], True, f"latest indexed version is {indexed[0]}")
    wanted = requested.strip().lstrip("v")
    if wanted in indexed or requested in indexed:
        match = wanted if wanted in indexed else requested
        return VersionResolution(requested, match, True, f"exact match {match}")
    specifier = _as_specifier(wanted)
    if specifier is not None:
        matching = [v for v in indexed if (p := _parse(v)) is not None and p in specifier]
        if matching:
            return VersionResolution(
                requested,
                matching[0],
                True,
                f"{matching[0]} is the newest indexed version matching {requested}",
            )
    prefix = wanted.removesuffix(".x").removesuffix(".*")
    by_prefix = [v for v in indexed if v == prefix or v.startswith(prefix + ".")]
    if by_prefix:
        return VersionResolution(
            requested, by_prefix[0], True, f"{by_prefix[0]} is the newest indexed version of {prefix}"
        )
    nearest = _nearest(wanted, indexed)
    return VersionResolution(
        requested,
        nearest,
        False,
        f"version {requested} is not indexed; using the nearest indexed version {nearest} "
        f"(indexed: {', '.join(indexed[:8])}{'…' if len(indexed) > 8 else ''})",
    )


def _as_specifier(text: str) -> SpecifierSet | None:
    if not any(op in text for op in ("<", ">", "=", "~", "!")):
        return None
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


def _nearest(wanted: str, indexed: list[str]) -> str:
    target = _parse(wanted)
    comparable = [(v, p) for v in indexed if (p := _parse(v)) is not None]
    if target is None or not comparable:
        return indexed[0]
    older = [v for v, p in comparable if p <= target]
    return older[0] if older else comparable[-1][0]
