"""The allow-list of the address guard (setting ``allowed_private_hosts``), used by crawls and fetches."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from librarian.errors import InvalidInputError
from librarian.ingest.sources.remote import AllowList, fetch_document, refuse_private_host
from tests.ingest.test_crawler_site import Site, demo_site, serve


@pytest.fixture
def site() -> Iterator[Site]:
    """The demo documentation site, served on 127.0.0.1."""
    yield from serve(demo_site())


def test_entries_are_hosts_addresses_or_networks() -> None:
    allowed = AllowList.parse(["127.0.0.1", " [::1] ", "10.0.0.0/8", "Docs.Internal."])

    assert allowed.allows("127.0.0.1", "127.0.0.1") and allowed.allows("anything", "::1")
    assert allowed.allows("x", "10.20.30.40") and allowed.allows("x", "::ffff:10.0.0.1")
    assert allowed.allows("docs.internal", "192.168.1.5")  # a named host, whatever it resolves to
    assert not allowed.allows("x", "127.0.0.2") and not allowed.allows("x", "192.168.1.5")


@pytest.mark.parametrize("entry", ["", "10.0.0.0/33", "not a host", "a/b"])
def test_malformed_entries_are_refused_with_their_value(entry: str) -> None:
    with pytest.raises(InvalidInputError, match="allowed_private_hosts entry"):
        AllowList.parse([entry])


def test_fetching_honours_the_allow_list(site: Site) -> None:
    url = f"{site.base}/docs/hidden.md"

    data, final = fetch_document(url, allowed_private_hosts=["127.0.0.0/8"])
    assert data.startswith(b"# Hidden page") and final == url
    with pytest.raises(InvalidInputError, match=r"127\.0\.0\.1 is a loopback address"):
        fetch_document(url, allowed_private_hosts=["10.0.0.0/8"])
    assert fetch_document(url, allow_private=True)[0] == data  # the older switch still works


def test_refuse_private_host_honours_the_allow_list() -> None:
    refuse_private_host("http://127.0.0.1:9/repo.git", allowed_private_hosts=["127.0.0.1"])
    with pytest.raises(InvalidInputError, match="loopback"):
        refuse_private_host("http://127.0.0.1:9/repo.git")
