"""Solutions linked to problem signatures, ranked by how well they worked.

A solution's record is its successes and failures. Ranking uses the lower bound of the 95 % Wilson
score interval of its success rate, so 1 success of 1 (bound 0.21) does not beat 40 of 45 (0.77),
scaled by how well its signature matches the problem (1 for the same signature, else the structured
similarity, at least 0.5 to count); ties go to the more used, then the more recently used.

The self-correcting loop's verified fixes are solutions in this model: ``get_solution`` reads them
from the loop's own table (``verified_fixes``, with its success and failure counts) for a signature
whose error messages match a fix's normalised error, rather than copying them into a second store.
They belong to the local organisation, which runs the task runtime.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from librarian.correction.models import VerifiedFix
from librarian.errors import InvalidInputError, NotFoundError
from librarian.incidents.models import Incident, Solution, SolutionOutcome
from librarian.incidents.signature import ProblemSignature, errors_match
from librarian.incidents.similarity import WEIGHTS, structured_parts
from librarian.index.grants_sql import grants_condition
from librarian.knowledge.access import LOCAL_ORGANIZATION_ID, Principal, Scope, can_read
from librarian.research.error_signature import normalize_error
from librarian.storage.models import as_utc, utcnow

if TYPE_CHECKING:
    from librarian.app import Librarian

MIN_MATCH = 0.5
Z_95 = 1.959963984540054


def wilson_lower_bound(successes: int, failures: int, z: float = Z_95) -> float:
    """The lower bound of the Wilson score interval of ``successes / (successes + failures)``."""
    trials = successes + failures
    if trials == 0:
        return 0.0
    rate = successes / trials
    centre = rate + z * z / (2 * trials)
    spread = z * math.sqrt((rate * (1 - rate) + z * z / (4 * trials)) / trials)
    return (centre - spread) / (1 + z * z / trials)


class SolutionService:
    """Link solutions to signatures, record outcomes, and answer ``get_solution``."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib

    def link_in(
        self,
        session: Session,
        principal: Principal,
        signature: ProblemSignature,
        *,
        title: str,
        solution: str,
        grants: list[str],
        visibility: str,
        document_id: int | None = None,
    ) -> Solution:
        """The solution ``solution`` of ``signature`` in the caller's organisation, created if new."""
        principal.require(Scope.WRITE, "recording a solution")
        if not solution.strip():
            raise InvalidInputError("solution: describe what fixed the problem")
        key = signature.key()
        # The same fix of the same problem is one solution only among rows of the same audience:
        # reusing a row saved with other grants would publish a private solution, or hand the
        # caller a row it may not read.
        candidates = session.scalars(
            select(Solution).where(
                Solution.organization_id == principal.organization_id,
                Solution.signature_key == key,
                Solution.solution == solution.strip(),
            )
        )
        for existing in candidates:
            if sorted(existing.access_grants or []) == sorted(grants):
                return existing
        row = Solution(
            organization_id=principal.organization_id,
            created_by=principal.user_id,
            visibility=visibility,
            allowed_teams=[],
            access_grants=grants,
            signature_key=key,
            problem_signature=signature.to_dict(),
            normalized=signature.normalized(),
            title=title.strip()[:500] or "solution",
            solution=solution.strip(),
            knowledge_document_id=document_id,
            successes=0,
            failures=0,
            uses=0,
        )
        session.add(row)
        session.flush()
        return row

    def record_outcome(
        self,
        principal: Principal,
        solution_id: int,
        *,
        worked: bool,
        incident_id: int | None = None,
        note: str | None = None,
    ) -> dict[str, Any]:
        """Record one use of a solution and whether it worked; returns its new record."""
        principal.require(Scope.WRITE, "recording a solution's outcome")
        with self._lib.sessions.begin() as session:
            row = session.get(Solution, solution_id, with_for_update=True)
            if row is None or not can_read(principal, row.access_grants):
                raise NotFoundError(f"no solution {solution_id}")
            if incident_id is not None:
                incident = session.get(Incident, incident_id)
                if incident is None or not can_read(principal, incident.access_grants):
                    raise InvalidInputError(f"incident_id: no incident {incident_id}")
            self.outcome_in(
                session, row, worked=worked, incident_id=incident_id, user_id=principal.user_id, note=note
            )
            return solution_view(row)

    @staticmethod
    def outcome_in(
        session: Session,
        row: Solution,
        *,
        worked: bool,
        incident_id: int | None,
        user_id: int | None,
        note: str | None = None,
    ) -> None:
        """Count one outcome of ``row`` inside the caller's transaction."""
        session.add(
            SolutionOutcome(
                solution_id=row.id, incident_id=incident_id, user_id=user_id, worked=worked, note=note
            )
        )
        row.uses += 1
        row.successes += 1 if worked else 0
        row.failures += 0 if worked else 1
        row.last_used_at = utcnow()

    def get_solution(
        self, principal: Principal, signature: ProblemSignature, limit: int = 5
    ) -> list[dict[str, Any]]:
        """``get_solution``: solutions of this problem (or one like it), the best-proven first."""
        principal.require(Scope.READ, "reading solutions")
        if signature.is_empty():
            raise InvalidInputError("problem_signature: give symptoms, error messages or services")
        if not 1 <= limit <= 50:
            raise InvalidInputError(f"limit: use 1 to 50, not {limit}")
        key = signature.key()
        query = signature.normalized()
        ranked: list[tuple[float, int, str, dict[str, Any]]] = []
        with self._lib.sessions() as session:
            dialect = session.get_bind().dialect.name
            rows = session.scalars(
                select(Solution).where(grants_condition(dialect, Solution.access_grants, principal.grants))
            )
            for row in rows:
                exact = row.signature_key == key
                if exact:
                    match = 1.0
                else:
                    parts = structured_parts(query, row.normalized or {}, row.problem_signature or {})
                    match = _structured_only(parts.parts)
                if match < MIN_MATCH:
                    continue
                view = solution_view(row)
                view["match"] = {"kind": "exact" if exact else "similar", "score": round(match, 4)}
                ranked.append(
                    (
                        view["confidence_lower_bound"] * (0.5 + 0.5 * match),
                        row.uses,
                        _stamp(row.last_used_at),
                        view,
                    )
                )
            if principal.organization_id == LOCAL_ORGANIZATION_ID or principal.grants is None:
                ranked += self._verified_fixes(session, signature)
        ranked.sort(key=lambda item: (item[0], item[1], item[2]), reverse=True)
        return [view for *_, view in ranked[:limit]]

    @staticmethod
    def _verified_fixes(
        session: Session, signature: ProblemSignature
    ) -> list[tuple[float, int, str, dict[str, Any]]]:
        # Fixes store research's normal form of the error (correction/problem.py): compare in it.
        errors = sorted({normalize_error(message) for message in signature.error_messages} - {""})
        if not errors:
            return []
        found = []
        active = select(VerifiedFix).where(VerifiedFix.retired_at.is_(None))
        for fix in session.scalars(active.order_by(VerifiedFix.id.desc()).limit(5000)):
            if not any(errors_match(error, fix.normalized_error) for error in errors):
                continue
            bound = wilson_lower_bound(fix.successes, fix.failures)
            uses = fix.successes + fix.failures
            fixed = (
                " ".join(str(part) for part in fix.fixed_template) if fix.kind == "command" else "a code edit"
            )
            view = {
                "id": f"verified-fix-{fix.id}",
                "kind": "verified_fix",
                "title": f"{fix.tool} {fix.tool_version or ''}: {fix.strategy}".strip(),
                "solution": f"{fix.rationale} Fixed command: {fixed}".strip(),
                "successes": fix.successes,
                "failures": fix.failures,
                "uses": uses,
                "success_rate": round(fix.successes / uses, 4) if uses else None,
                "confidence_lower_bound": round(bound, 4),
                "last_used_at": _stamp(fix.last_used_at),
                "knowledge_document_id": None,
                "match": {"kind": "error", "score": 1.0},
            }
            found.append((bound, uses, _stamp(fix.last_used_at), view))
        return found


def _structured_only(parts: dict[str, float]) -> float:
    """How well two signatures match on their structured parts alone (similarity's weights)."""
    weights = {name: weight for name, weight in WEIGHTS.items() if name != "text"}
    total = sum(weights[name] for name in parts if name in weights)
    if not total:
        return 0.0
    return sum(weights[name] * value for name, value in parts.items() if name in weights) / total


def _stamp(moment: Any) -> str:
    return "" if moment is None else as_utc(moment).isoformat()


def solution_view(row: Solution) -> dict[str, Any]:
    """A solution as the interfaces return it."""
    trials = row.successes + row.failures
    return {
        "id": row.id,
        "kind": "solution",
        "title": row.title,
        "solution": row.solution,
        "problem_signature": row.problem_signature,
        "successes": row.successes,
        "failures": row.failures,
        "uses": row.uses,
        "success_rate": round(row.successes / trials, 4) if trials else None,
        "confidence_lower_bound": round(wilson_lower_bound(row.successes, row.failures), 4),
        "last_used_at": _stamp(row.last_used_at) or None,
        "knowledge_document_id": row.knowledge_document_id,
        "url": f"/solutions/{row.id}",
    }
