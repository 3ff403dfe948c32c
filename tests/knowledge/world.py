"""A randomised multi-tenant store for access-control tests: organisations, teams, users, documents of
every visibility, and an independent oracle of who may see what.

The oracle is written from the rules in the issue, not from ``knowledge/access.py``, so a mistake in
the grants code shows up as a disagreement instead of being repeated by the test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from librarian.app import Librarian
from librarian.incidents.learning import Learning
from librarian.incidents.signature import ProblemSignature
from librarian.knowledge.access import Principal, SourceOwner, Visibility
from librarian.knowledge.documents import DocumentDraft

TOPICS = ["memory", "disk", "network", "certificate", "database", "queue", "deploy", "latency"]
WORDS = ["pod", "crash", "restart", "timeout", "alert", "rollback", "limit", "error", "outage", "fix"]


@dataclass
class Person:
    name: str
    organization: str
    teams: set[str]
    admin: bool
    principal: Principal | None = None
    token: str | None = None


@dataclass
class Doc:
    id: int
    organization: str
    author: str
    visibility: str
    teams: set[str]
    topic: str


@dataclass
class World:
    people: dict[str, Person] = field(default_factory=dict)
    documents: dict[int, Doc] = field(default_factory=dict)
    # SDK documentation ingested by a source: (sdk name, organisation, visibility, author).
    sdks: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # Incidents and solutions, with the visibility of the learning that made them.
    incidents: dict[int, Doc] = field(default_factory=dict)
    solutions: dict[int, Doc] = field(default_factory=dict)

    def may_see(self, person: Person, doc: Doc) -> bool:
        """The rules of the issue: public to all; else only inside the organisation, and then to
        everyone (organization), the author and the allowed teams (teams), or the author (private)."""
        if doc.visibility == "public":
            return True
        if doc.organization != person.organization:
            return False
        if doc.visibility == "organization" or doc.author == person.name:
            return True
        return doc.visibility == "teams" and bool(doc.teams & person.teams)

    def may_see_sdk(self, person: Person, sdk: str) -> bool:
        organization, visibility, author = self.sdks[sdk]
        if visibility == "public":
            return True
        if organization != person.organization:
            return False
        return visibility == "organization" or author == person.name


def build_world(lib: Librarian, seed: int, docs_folder: Path, documents: int = 48) -> World:
    """Three organisations of four users in two teams each, ``documents`` random documents, and one
    SDK per organisation ingested organisation-wide plus one public SDK."""
    rng = random.Random(seed)
    world = World()
    operator = lib.default_principal
    for org_index in range(3):
        org = f"org{org_index}"
        lib.identity.create_organization(operator, org)
        for team in ("red", "blue"):
            lib.identity.create_team(operator, org, team)
        for user_index in range(4):
            name = f"{org}-u{user_index}"
            teams = set(rng.sample(["red", "blue"], rng.randint(0, 2)))
            admin = user_index == 0
            lib.identity.create_user(operator, org, name, admin=admin, teams=sorted(teams))
            scopes = ["admin"] if admin else ["write"]
            token = lib.identity.create_token(operator, org, name, scopes=scopes)["token"]
            person = Person(name, org, teams, admin, token=token)
            person.principal = lib.identity.authenticate(token)
            world.people[name] = person
    people = list(world.people.values())
    for index in range(documents):
        author = rng.choice(people)
        choices = ["private", "teams", "organization"] + (["public"] if author.admin else [])
        visibility = rng.choice(choices)
        teams = set(rng.sample(["red", "blue"], rng.randint(1, 2))) if visibility == "teams" else set()
        topic = rng.choice(TOPICS)
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        assert author.principal is not None
        created = lib.knowledge.documents.create(
            author.principal,
            DocumentDraft(
                title=f"{topic} incident {index}",
                content=f"Shared runbook text about {topic}: {words}. Check the {topic} dashboards first.",
                document_type=rng.choice(["runbook", "solution", "wiki", "incident_report"]),
                visibility=visibility,
                allowed_teams=tuple(sorted(teams)) if teams else None,
            ),
        )
        world.documents[created["id"]] = Doc(
            created["id"], author.organization, author.name, visibility, teams, topic
        )
        if index % 3 == 0 and visibility != "teams":  # a saved investigation of the same visibility
            saved = lib.learning.save(
                author.principal,
                Learning(
                    title=f"{topic} investigation {index}",
                    content=f"The {topic} alerts fired; {words}.",
                    problem_signature=ProblemSignature(
                        symptoms=(f"{topic} alert", rng.choice(WORDS)),
                        error_messages=(f"{topic} error code {rng.randint(1, 9)}",),
                        affected_services=(f"svc-{topic}",),
                    ),
                    solution=f"Restart the {topic} service",
                    worked=True,
                    visibility=visibility,
                ),
            )
            record = Doc(saved["document_id"], author.organization, author.name, visibility, set(), topic)
            world.documents[saved["document_id"]] = record
            world.incidents[saved["incident"]["id"]] = record
            world.solutions[saved["solution"]["id"]] = record
    # SDK documentation: each organisation's own tool, organisation-wide, and one public SDK.
    for org_index in range(3):
        org = f"org{org_index}"
        owner_person = world.people[f"{org}-u0"]
        sdk = f"tool{org_index}"
        folder = docs_folder / sdk
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "deploy.md").write_text(
            f"# {sdk} deploy\n\nUse `{sdk} deploy --memory LIMIT` to deploy a pod.\n"
        )
        principal = owner_person.principal
        assert principal is not None
        owner = SourceOwner(principal.organization_id, principal.user_id, Visibility.ORGANIZATION)
        assert lib.ingest(str(folder), sdk_name=sdk, sdk_version="1.0", owner=owner).status == "ok"
        world.sdks[sdk] = (org, "organization", owner_person.name)
    public = docs_folder / "opentool"
    public.mkdir(parents=True, exist_ok=True)
    (public / "deploy.md").write_text(
        "# opentool deploy\n\nUse `opentool deploy --memory LIMIT` for a pod.\n"
    )
    assert lib.ingest(str(public), sdk_name="opentool", sdk_version="2.0").status == "ok"
    world.sdks["opentool"] = ("local", "public", "local")
    return world
