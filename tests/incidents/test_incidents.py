"""Incidents on every backend: similarity by signature, outcomes, verdicts, imports, solutions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import delete, func, insert, select

from librarian.app import Librarian
from librarian.errors import InvalidInputError, NotFoundError
from librarian.incidents.learning import Learning
from librarian.incidents.models import Incident, Solution
from librarian.incidents.service import IncidentDraft
from librarian.incidents.signature import ProblemSignature, symptom_terms, symptoms_match
from librarian.incidents.solutions import wilson_lower_bound
from librarian.storage.models import Document

OOM = IncidentDraft(
    title="Checkout pods OOMKilled after release 2.5",
    description="Checkout pods restarted in a loop right after the 2.5 deploy.",
    severity="high",
    signature=ProblemSignature(
        symptoms=("pod crash", "OOMKilled", "high memory"),
        error_messages=("Container checkout-7f9c4 in pod checkout-7f9c4-x2 was OOMKilled (exit code 137)",),
        affected_services=("checkout",),
        infrastructure="kubernetes",
    ),
    root_cause="Memory leak in the 2.5 image cache",
    solution_applied="Rolled back to 2.4 and raised the memory limit to 2Gi",
    resolution_time_minutes=25,
    was_successful=True,
)
DISK = IncidentDraft(
    title="Orders database stopped accepting writes",
    description="Postgres on db-3 refused writes; the orders API returned 500s.",
    severity="critical",
    signature=ProblemSignature(
        symptoms=("writes failing", "disk full"),
        error_messages=("could not extend file base/16384/2619: No space left on device",),
        affected_services=("orders", "postgres"),
        infrastructure="vm",
    ),
    root_cause="WAL archiving stalled and filled the disk",
    solution_applied="Freed space by archiving WAL, then grew the volume",
    was_successful=True,
)
CERT = IncidentDraft(
    title="TLS certificate expired on the public API",
    description="Clients failed TLS handshakes against api.example.com.",
    severity="critical",
    signature=ProblemSignature(
        symptoms=("handshake failures",),
        error_messages=(
            "x509: certificate has expired or is not yet valid: current time 2025-03-02T10:00:00Z",
        ),
        affected_services=("api-gateway",),
    ),
    solution_applied="Renewed the certificate and automated renewal",
    was_successful=True,
)


def test_a_new_occurrence_finds_its_past_incident_by_signature(library: Librarian) -> None:
    me = library.default_principal
    ids = {draft.title: library.incidents.create(me, draft)["id"] for draft in (OOM, DISK, CERT)}

    found = library.incidents.find_similar(
        me,
        "checkout is crashing again",
        signature=ProblemSignature(
            symptoms=("pods crashing",),
            error_messages=(
                "Container checkout-91ab2 in pod checkout-91ab2-kq was OOMKilled (exit code 137)",
            ),
            affected_services=("checkout",),
        ),
    )

    top = found[0]
    assert top["id"] == ids[OOM.title]
    assert top["matching_symptoms"] == ["pod crash"]
    assert top["matched"]["affected_services"] == ["checkout"] and len(top["matched"]["error_messages"]) == 1
    assert top["root_cause"] == OOM.root_cause and top["resolution_time_minutes"] == 25
    assert top["similarity_score"] > found[1]["similarity_score"] + 0.3
    assert set(top) >= {"similarity_score", "severity", "solution", "occurred_at", "matching_symptoms"}


def test_an_incident_whose_fix_held_comes_before_one_that_recurred(library: Librarian) -> None:
    me = library.default_principal
    recurred = library.incidents.create(
        me, IncidentDraft(**{**OOM.__dict__, "title": "OOM (came back)", "recurred": True})
    )
    held = library.incidents.create(me, IncidentDraft(**{**OOM.__dict__, "title": "OOM (fixed for good)"}))

    found = library.incidents.find_similar(me, "", signature=OOM.signature, limit=2)

    assert [item["id"] for item in found] == [held["id"], recurred["id"]]


def test_the_similarity_index_follows_new_late_and_deleted_incidents(library: Librarian) -> None:
    """The cached matrix reloads when an incident is added, also one whose transaction committed after
    a later id's (PostgreSQL hands out ids before commit); one deleted by hand is never answered."""
    me = library.default_principal
    oom = library.incidents.create(me, OOM)["id"]
    disk = library.incidents.create(me, DISK)["id"]
    assert library.incidents.find_similar(me, "", signature=OOM.signature)[0]["id"] == oom

    with library.sessions.begin() as session:  # what an operator's DELETE would do
        row = dict(session.execute(select(Incident.__table__).where(Incident.id == oom)).mappings().one())
        session.execute(delete(Incident).where(Incident.id == oom))
    assert [item["id"] for item in library.incidents.find_similar(me, "", signature=OOM.signature)] == [disk]

    cert = library.incidents.create(me, CERT)["id"]  # the matrix is read again, without the OOM
    assert oom not in {item["id"] for item in library.incidents.find_similar(me, "", signature=OOM.signature)}
    with library.sessions.begin() as session:  # the OOM commits late, under its earlier id
        session.execute(insert(Incident).values(**row))
    found = library.incidents.find_similar(me, "", signature=OOM.signature)
    assert found[0]["id"] == oom and {item["id"] for item in found} == {oom, disk, cert}


def test_verdicts_hide_a_pair_and_link_related_incidents(library: Librarian) -> None:
    me = library.default_principal
    current = library.incidents.create(me, IncidentDraft(**{**OOM.__dict__, "title": "Current OOM"}))
    old = library.incidents.create(me, OOM)
    other = library.incidents.create(me, IncidentDraft(**{**OOM.__dict__, "title": "Look-alike OOM"}))

    library.incidents.mark(me, current["id"], other["id"], similar=False)
    library.incidents.mark(me, current["id"], old["id"], similar=True)
    found = library.incidents.find_similar(me, "", signature=OOM.signature, incident_id=current["id"])

    assert [item["id"] for item in found] == [old["id"]]  # itself and the look-alike are left out
    assert library.incidents.get(me, old["id"])["related_incidents"] == [current["id"]]
    with pytest.raises(InvalidInputError):
        library.incidents.mark(me, current["id"], current["id"], similar=True)


def test_solutions_rank_by_a_lower_confidence_bound(library: Librarian) -> None:
    me = library.default_principal
    signature = OOM.signature
    lucky = library.learning.save(
        me,
        Learning(
            title="Restart",
            content="Restarted it.",
            problem_signature=signature,
            solution="Restart the pod",
            worked=True,
        ),
    )["solution"]
    proven = library.learning.save(
        me,
        Learning(
            title="Raise limit", content="Raised it.", problem_signature=signature, solution="Raise the limit"
        ),
    )["solution"]
    for index in range(45):
        library.solutions.record_outcome(me, proven["id"], worked=index < 40)

    ranked = library.solutions.get_solution(me, signature)

    assert [s["id"] for s in ranked[:2]] == [proven["id"], lucky["id"]]
    assert (
        ranked[0]["successes"] == 40 and ranked[0]["failures"] == 5 and ranked[0]["match"]["kind"] == "exact"
    )
    assert wilson_lower_bound(1, 0) < wilson_lower_bound(40, 5)


def test_save_learning_is_one_transaction(library: Librarian) -> None:
    me = library.default_principal
    with library.sessions() as session:
        before = [session.scalar(select(func.count()).select_from(t)) for t in (Document, Incident, Solution)]
    with pytest.raises(InvalidInputError, match="related_incidents"):
        library.learning.save(
            me,
            Learning(
                title="Half saved?",
                content="Never.",
                problem_signature=OOM.signature,
                solution="x",
                related_incident_ids=(999,),
            ),
        )
    with library.sessions() as session:
        after = [session.scalar(select(func.count()).select_from(t)) for t in (Document, Incident, Solution)]
    assert after == before

    saved = library.learning.save(
        me,
        Learning(
            title="OOM fix",
            content="We raised memory.",
            problem_signature=OOM.signature,
            solution="Raise it",
            worked=True,
        ),
    )
    assert saved["incident"]["knowledge_document_id"] == saved["document_id"]
    assert saved["solution"]["successes"] == 1
    hits = library.knowledge.search("raised memory", principal=me)
    assert hits[0]["id"] == saved["document_id"]


def test_other_organisations_incidents_are_never_candidates(library: Librarian) -> None:
    operator = library.default_principal
    library.identity.create_organization(operator, "rival")
    library.identity.create_user(operator, "rival", "spy")
    spy = library.identity.principal_of("rival", "spy")
    mine = library.incidents.create(operator, OOM)

    assert library.incidents.find_similar(spy, "", signature=OOM.signature) == []
    with pytest.raises(NotFoundError):
        library.incidents.get(spy, mine["id"])


def test_symptoms_match_by_stemmed_words() -> None:
    assert symptoms_match(symptom_terms("pods crashing"), symptom_terms("pod crash"))
    assert symptoms_match(symptom_terms("OOMKilled"), symptom_terms("containers OOMKilled repeatedly"))
    assert not symptoms_match(symptom_terms("disk full"), symptom_terms("pod crash"))


def test_imports_report_bad_entries_by_file_and_line_and_keep_the_rest(
    library: Librarian, tmp_path: Path
) -> None:
    folder = tmp_path / "history"
    folder.mkdir()
    (folder / "2025-10-15-checkout.md").write_text(
        "---\ntitle: Checkout OOM\nseverity: high\noccurred_at: 2025-10-15T10:30:00Z\n"
        "affected_services: [checkout]\nsymptoms: [pod crash, OOMKilled]\nresolution_time_minutes: 25\n"
        "authors: [sam]\n---\n# Checkout OOM\n\n## Summary\n\nCheckout pods were OOMKilled.\n\n"
        "## Root cause\n\nA memory leak in 2.5.\n\n## Resolution\n\nRolled back to 2.4.\n\n"
        "1. Roll back the deployment\n2. Raise the memory limit\n\n## Timeline\n\n- 10:30 paged\n"
    )
    (folder / "broken.md").write_text("---\ntitle: [unclosed\n---\n# Broken\n")
    (folder / "export.csv").write_text(
        "title,severity,symptoms,affected_services,was_successful\n"
        "Disk full on db-3,critical,disk full;writes failing,orders;postgres,true\n"
        "Bad severity,apocalyptic,,,\n"
        "Bad flag,low,,,maybe\n"
    )
    (folder / "export.json").write_text(
        json.dumps(
            {
                "incidents": [
                    {"title": "Cert expired", "error_messages": ["x509: certificate has expired"]},
                    {"severity": "low"},
                ]
            }
        )
    )
    (folder / "no-title.csv").write_text("name,severity\nx,low\n")

    report = library.incidents.import_path(library.default_principal, folder)

    assert report["imported"] == 3
    problems = {
        (Path(p["file"]).name, p.get("line", p.get("entry"))): p["reason"] for p in report["problems"]
    }
    assert "front matter" in problems[("broken.md", None)]
    assert "severity" in problems[("export.csv", 3)] and "was_successful" in problems[("export.csv", 4)]
    assert "title is missing" in problems[("export.json", 1)]
    assert "'title' column" in problems[("no-title.csv", None)]
    checkout = library.incidents.get(library.default_principal, report["incident_ids"][0])
    assert (
        checkout["root_cause"] == "A memory leak in 2.5."
        and checkout["resolution_steps"][0] == "Roll back the deployment"
    )
    assert checkout["occurred_at"].startswith("2025-10-15T10:30") and checkout["origin"][
        "ignored_front_matter"
    ] == ["authors"]


def test_bad_signatures_name_the_field() -> None:
    with pytest.raises(InvalidInputError, match=r"problem_signature\.symptoms"):
        ProblemSignature.from_mapping({"symptoms": [1, 2]})
    with pytest.raises(InvalidInputError, match="unknown field 'colour'"):
        ProblemSignature.from_mapping({"colour": "red"})
    with pytest.raises(InvalidInputError, match="severity"):
        IncidentDraft(title="t", severity="apocalyptic").check()


def test_the_same_fix_saved_privately_and_shared_stays_two_audiences(library: Librarian) -> None:
    """A private investigation's solution is never the shared one of the same fix, either way round."""
    operator = library.default_principal
    library.identity.create_organization(operator, "acme")
    for name in ("alice", "bob", "carol"):
        library.identity.create_user(operator, "acme", name)
    alice, bob, carol = (library.identity.principal_of("acme", name) for name in ("alice", "bob", "carol"))

    def save(author: object, visibility: str) -> int:
        saved = library.learning.save(
            author,  # type: ignore[arg-type]
            Learning(
                title="checkout OOM",
                content="Checkout pods were OOMKilled.",
                problem_signature=OOM.signature,
                solution="Raise the memory limit to 2Gi",
                worked=True,
                visibility=visibility,
            ),
        )
        return int(saved["solution"]["id"])

    shared = save(alice, "organization")
    private = save(bob, "private")
    assert private != shared
    private_first = save(bob, "private")
    assert private_first == private  # the same author's same fix, same audience: one solution

    seen_by_carol = {s["id"] for s in library.solutions.get_solution(carol, OOM.signature, limit=20)}
    assert shared in seen_by_carol and private not in seen_by_carol
    seen_by_bob = {s["id"] for s in library.solutions.get_solution(bob, OOM.signature, limit=20)}
    assert {shared, private} <= seen_by_bob
