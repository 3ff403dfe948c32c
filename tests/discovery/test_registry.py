"""The verb and tool registry: manifests validated by field, search with reasons, access control
inside the ranking, quarantine, learning from use, verb resolution (issue 16)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.discovery.manifest import ManifestInvalidError
from librarian.discovery.ranking import ToolFilters
from librarian.discovery.resolution import split_goals
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import ForbiddenError, InvalidInputError, NotFoundError
from librarian.knowledge.access import Principal

TOOLS: list[dict[str, Any]] = [
    {
        "toolId": "time.get_current_time",
        "name": "get_current_time",
        "type": "mcp",
        "description": "Get the current time in a specific timezone",
        "actionVerbs": ["GET_TIME"],
        "inputSchema": {
            "type": "object",
            "properties": {"timezone": {"type": "string", "description": "IANA timezone name"}},
            "required": ["timezone"],
        },
    },
    {
        "toolId": "weather.forecast",
        "name": "forecast",
        "type": "openapi",
        "description": "Weather forecast for a city: temperature, rain and wind for the next days",
        "capabilities": ["weather_data"],
        "category": "weather",
    },
    {
        "toolId": "git.status",
        "name": "git_status",
        "type": "mcp",
        "description": "Shows the working tree status of a git repository",
        "category": "vcs",
    },
    {
        "toolId": "mail.send",
        "name": "send_email",
        "type": "python",
        "description": "Send an email message to a recipient with a subject and a body",
    },
    {
        "toolId": "pdf.summarize",
        "name": "summarize_pdf",
        "type": "python",
        "description": "Summarize the text of a PDF document",
    },
]


@pytest.fixture
def lib(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    with Librarian(Settings(home=tmp_path / "home"), embedder=embedder) as library:
        library.discovery.register_tools(TOOLS)
        yield library


def _ids(answer: dict[str, Any]) -> list[str]:
    return [result["toolId"] for result in answer["results"]]


def test_search_finds_the_tool_by_meaning_with_score_confidence_and_why(lib: Librarian) -> None:
    answer = lib.discovery.search_tools("what time is it in Tokyo right now", top_k=3)

    best = answer["results"][0]
    assert best["toolId"] == "time.get_current_time"
    assert best["score"] > answer["results"][1]["score"]
    assert 0 <= best["confidence"] <= 1 and best["why"] and "meaning" in best["why"][0]


def test_filters_apply_before_ranking_so_top_k_is_filled(lib: Librarian) -> None:
    answer = lib.discovery.search_tools("time", top_k=2, filters=ToolFilters(tool_type="python"))

    assert len(answer["results"]) == 2
    assert all(result["type"] == "python" for result in answer["results"])
    weather = lib.discovery.search_tools("anything", filters=ToolFilters(capability="WEATHER_DATA"))
    assert _ids(weather) == ["weather.forecast"]


def test_registering_again_is_unchanged_and_a_change_updates_in_place(lib: Librarian) -> None:
    again = lib.discovery.register_tool(TOOLS[2])
    changed = lib.discovery.register_tool(
        {**TOOLS[2], "description": "Show git repository status and branch"}
    )

    assert again["change"] == "unchanged"
    assert changed["change"] == "updated" and changed["id"] == again["id"]
    assert lib.discovery.tool("git.status")["description"] == "Show git repository status and branch"


def test_a_bad_manifest_names_every_field_and_the_registry_keeps_what_it_had(lib: Librarian) -> None:
    with pytest.raises(ManifestInvalidError) as caught:
        lib.discovery.register_tool({"type": "ftp", "inputSchema": {"type": "object", "required": "x"}})

    problems = " | ".join(caught.value.problems)
    assert "name: is required" in problems
    assert "type: 'ftp'" in problems
    assert "inputSchema: not a valid JSON Schema at required" in problems
    outcome = lib.discovery.register_tools([TOOLS[0], {"name": "broken", "type": "mcp", "inputSchema": []}])
    assert outcome["unchanged"] == ["time.get_current_time"]
    assert len(outcome["errors"]) == 1 and "manifest 1" in outcome["errors"][0]
    assert lib.discovery.stats()["tools_active"] == len(TOOLS)


def test_quarantined_and_inactive_tools_leave_search_until_approved(lib: Librarian) -> None:
    lib.discovery.set_status("weather.forecast", "quarantined")
    assert "weather.forecast" not in _ids(lib.discovery.search_tools("will it rain tomorrow", top_k=5))
    review = lib.discovery.search_tools("rain", filters=ToolFilters(statuses=("quarantined",)))
    assert _ids(review) == ["weather.forecast"]

    lib.discovery.set_status("weather.forecast", "active")
    assert _ids(lib.discovery.search_tools("will it rain tomorrow", top_k=1)) == ["weather.forecast"]


def test_only_an_administrator_approves_a_quarantined_tool(lib: Librarian) -> None:
    operator = lib.default_principal
    lib.identity.create_user(operator, 1, "dev")
    dev = lib.identity.principal_of(1, "dev")
    mine = lib.discovery.register_tool(
        {"name": "lint", "type": "cli", "description": "Lint Python"}, principal=dev
    )
    lib.discovery.set_status(mine["toolId"], "quarantined", principal=dev)

    with pytest.raises(ForbiddenError, match="admin"):
        lib.discovery.set_status(mine["toolId"], "active", principal=dev)
    with pytest.raises(ForbiddenError, match="admin"):  # no way round the review through "inactive"
        lib.discovery.set_status(mine["toolId"], "inactive", principal=dev)
    assert lib.discovery.set_status(mine["toolId"], "active")["status"] == "active"


def test_a_tool_that_runs_a_program_here_waits_for_an_administrator(lib: Librarian) -> None:
    operator = lib.default_principal
    lib.identity.create_user(operator, 1, "dev")
    dev = lib.identity.principal_of(1, "dev")
    command = {"name": "x", "type": "mcp", "binding": {"command": ["sh", "-c", "id"], "tool": "x"}}
    remote = {"name": "y", "type": "mcp", "binding": {"url": "https://mcp.example.org/mcp", "tool": "y"}}

    assert lib.discovery.register_tool(command, principal=dev)["status"] == "quarantined"
    assert lib.discovery.register_tool(remote, principal=dev)["status"] == "active"
    # Turning a reviewed network tool into a local program sends it back to review.
    swapped = {**remote, "binding": {"command": ["sh", "-c", "id"], "tool": "y"}}
    assert lib.discovery.register_tool(swapped, principal=dev)["status"] == "quarantined"
    assert lib.discovery.register_tool({**command, "name": "z"})["status"] == "active"


def test_no_caller_ever_gets_a_tool_it_may_not_see(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    """Randomised: organisations, teams, users, tools of every visibility; count every leak."""
    rng = random.Random(16)
    with Librarian(Settings(home=tmp_path / "acl"), embedder=embedder) as lib:
        operator = lib.default_principal
        members: list[Principal] = []
        for org in ("north", "south", "east"):
            lib.identity.create_organization(operator, org)
            lib.identity.create_team(operator, org, "ops")
            lib.identity.create_user(operator, org, "admin", admin=True)
            for user in ("ann", "bob"):
                lib.identity.create_user(operator, org, user, teams=["ops"] if user == "ann" else [])
                members.append(lib.identity.principal_of(org, user))
        owner_of: dict[str, Principal] = {}
        readers: dict[str, set[tuple[int, int]]] = {}
        for number in range(30):
            author = rng.choice(members)
            visibility = rng.choice(["private", "organization", "teams"])
            teams = tuple(sorted(author.team_ids)) if visibility == "teams" and author.team_ids else ()
            if visibility == "teams" and not teams:
                visibility = "private"
            key = f"t{number}.{author.organization_id}"
            lib.discovery.register_tool(
                {
                    "toolId": key,
                    "name": f"tool {number}",
                    "type": "python",
                    "description": TOOLS[number % 5]["description"],
                },
                principal=author,
                visibility=visibility,
                allowed_teams=teams,
            )
            owner_of[key] = author
            readers[key] = {
                (m.organization_id, m.user_id)
                for m in members
                if m.organization_id == author.organization_id
                and (
                    visibility == "organization"
                    or m.user_id == author.user_id
                    or (visibility == "teams" and not m.team_ids.isdisjoint(teams))
                )
            }
        leaks = 0
        for member in members:
            who = (member.organization_id, member.user_id)
            for tool in TOOLS:
                found = _ids(lib.discovery.search_tools(tool["description"], principal=member, top_k=50))
                leaks += sum(who not in readers[key] for key in found)
            listed = [view["toolId"] for view in lib.discovery.tools(principal=member, limit=1000)]
            leaks += sum(who not in readers[key] for key in listed)
            for key in readers:
                if who not in readers[key]:
                    with pytest.raises(NotFoundError):
                        lib.discovery.tool(key, principal=member)
    assert leaks == 0


def test_a_served_request_raises_its_tool_for_similar_requests_of_the_same_organisation(
    lib: Librarian,
) -> None:
    held_apart = "prepare an executive brief of the attached quarterly report"
    before = _ids(lib.discovery.search_tools(held_apart, top_k=5))

    for request in ("give me a short brief of this annual report file", "brief me on the report attached"):
        lib.discovery.record_use("pdf.summarize", request)
    after = lib.discovery.search_tools(held_apart, top_k=5)

    assert _ids(after)[0] == "pdf.summarize"
    assert before.index("pdf.summarize") >= _ids(after).index("pdf.summarize")
    assert any("served 2 similar request" in reason for reason in after["results"][0]["why"])
    lib.identity.create_organization(lib.default_principal, "other")
    lib.identity.create_user(lib.default_principal, "other", "eve")
    eve = lib.identity.principal_of("other", "eve")
    lib.discovery.register_tools(TOOLS[3:], principal=eve)
    theirs = lib.discovery.search_tools(held_apart, principal=eve, top_k=2)["results"]
    assert not any("served" in reason for result in theirs for reason in result["why"])


def test_verbs_register_discover_and_refuse_a_cycle(lib: Librarian) -> None:
    lib.discovery.register_verb({"verb": "get time", "description": "Tell the current time in a place"})
    lib.discovery.register_verb(
        {"verb": "REPORT_TIME", "description": "Tell the time and mail it", "decomposition": ["GET_TIME"]}
    )
    with pytest.raises(InvalidInputError, match=r"cycle: GET_TIME -> REPORT_TIME -> GET_TIME"):
        lib.discovery.register_verb(
            {"verb": "GET_TIME", "description": "Tell the time", "decomposition": ["REPORT_TIME"]}
        )

    found = lib.discovery.discover_verbs("what is the time in Paris")
    assert found["verbs"][0]["verb"] == "GET_TIME"
    assert found["tools"][0]["toolId"] == "time.get_current_time"
    assert found["best"] is not None


def test_a_verb_resolves_exactly_by_substitution_by_decomposition_or_is_created(lib: Librarian) -> None:
    lib.discovery.register_verb({"verb": "GET_TIME", "description": "Tell the current time"})

    exact = lib.discovery.resolve_verb("get_time")
    substituted = lib.discovery.resolve_verb("CHECK_RAIN", "weather forecast for Berlin: will it rain")
    decomposed = lib.discovery.resolve_verb(
        "BRIEF_AND_MAIL", "summarize the text of the PDF document and then send an email message to Bob"
    )
    created = lib.discovery.resolve_verb("LAUNCH_ROCKET", "launch a rocket into orbit")

    assert (exact.kind, exact.bindings[0].tool) == ("exact", "time.get_current_time")
    assert (substituted.kind, substituted.bindings[0].tool) == ("substituted", "weather.forecast")
    assert decomposed.kind == "decomposed"
    assert [b.tool for b in decomposed.bindings] == ["pdf.summarize", "mail.send"]
    assert created.kind == "created" and "novel verb" in created.rationale
    assert lib.discovery.verb("LAUNCH_ROCKET")["status"] == "novel"
    # A novel verb is not offered as a match for other verbs, and it is never registered twice.
    assert lib.discovery.resolve_verb("LAUNCH_ROCKET", "launch a rocket into orbit").kind == "created"
    assert len([v for v in lib.discovery.verbs() if v["verb"] == "LAUNCH_ROCKET"]) == 1


def test_compound_descriptions_split_into_goals() -> None:
    assert split_goals("fetch the report, then summarize it and send it to Bob") == [
        "fetch the report",
        "summarize it",
        "send it to Bob",
    ]
    assert split_goals("search flights to Rome") == ["search flights to Rome"]


def test_how_a_tool_is_called_is_shown_only_to_who_may_change_it(lib: Librarian) -> None:
    operator = lib.default_principal
    for name in ("dev", "ops"):
        lib.identity.create_user(operator, 1, name)
    dev, ops = lib.identity.principal_of(1, "dev"), lib.identity.principal_of(1, "ops")
    binding = {"url": "https://mcp.example.org/mcp?key=s3cret", "headers": {"Authorization": "Bearer x"}}
    lib.discovery.register_tool(
        {"name": "remote", "type": "mcp", "binding": {**binding, "tool": "r"}}, principal=dev
    )

    own = lib.discovery.tool("remote", principal=dev)
    other = lib.discovery.tool("remote", principal=ops)

    assert own["binding"]["headers"] == {"Authorization": "***"} and "s3cret" in own["binding"]["url"]
    assert other["binding"] is None and other["name"] == "remote"
