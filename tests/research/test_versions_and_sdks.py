"""SDK names and version resolution, as pure functions."""

from __future__ import annotations

import pytest

from librarian.research.sdks import IndexedSdk, closest_names, normal_form, resolve_sdk
from librarian.research.versions import resolve_version, sort_versions

INDEXED = sort_versions(["1.9.0", "2.14.3", "2.15.0", "2.15.2", "3.0.0", "main"])


def test_versions_sort_newest_first_with_labels_last() -> None:
    assert INDEXED == ["3.0.0", "2.15.2", "2.15.0", "2.14.3", "1.9.0", "main"]


@pytest.mark.parametrize(
    ("requested", "resolved", "exact"),
    [
        (None, "3.0.0", True),
        ("latest", "3.0.0", True),
        ("2.15.0", "2.15.0", True),
        ("v2.15.0", "2.15.0", True),
        ("2.15", "2.15.2", True),
        ("2.x", "2.15.2", True),
        (">=2,<3", "2.15.2", True),
        ("~=2.14.0", "2.14.3", True),
        ("main", "main", True),
        ("2.16.1", "2.15.2", False),
        ("0.1", "1.9.0", False),
        ("9.9.9", "3.0.0", False),
    ],
)
def test_resolution(requested: str | None, resolved: str, exact: bool) -> None:
    result = resolve_version(requested, INDEXED)

    assert (result.resolved, result.exact) == (resolved, exact)
    if not exact:
        assert f"{requested} is not indexed" in result.note and resolved in result.note


def test_aliases_share_a_normal_form_without_naming_any_tool() -> None:
    assert normal_form("aws") == normal_form("awscli") == normal_form("AWS-CLI") == "aws"
    assert normal_form("python-requests") != normal_form("requests")
    known = [IndexedSdk("aws-cli", ["1.46.3"], 10), IndexedSdk("git", ["2.39.5"], 5)]
    assert resolve_sdk("awscli", known) == known[0] and resolve_sdk("aws", known) == known[0]
    assert resolve_sdk("gti", known) is None
    assert closest_names("gti", known) == ["git"]
