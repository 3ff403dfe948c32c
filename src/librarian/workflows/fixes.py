"""The verified fixes the loop learned, and the strategy policy's statistics, as an interface shows them.

Both are the machine's own knowledge: the runtime learns them from every workflow it runs, whoever
submitted it. So, as with the verified fixes that ``find_solutions`` offers (``incidents/solutions.py``),
they are shown to the local organisation (the runtime's operator and its users) and to principals that
see everything, and only an administrator of the local organisation (or the operator) may retire one.
A retired fix is never reused; its record stays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update

from librarian.correction.models import VerifiedFix
from librarian.errors import ConflictError, ForbiddenError, InvalidInputError, NotFoundError
from librarian.incidents.solutions import wilson_lower_bound
from librarian.knowledge.access import LOCAL_ORGANIZATION_ID, Principal, Scope
from librarian.runtime.models import StrategyStat
from librarian.storage.models import as_utc, utcnow

if TYPE_CHECKING:
    from librarian.app import Librarian

__all__ = ["FixCatalog", "fix_view"]

MAX_PAGE = 100
MAX_REASON_CHARS = 2000


class FixCatalog:
    """Read and retire verified fixes; read the strategy statistics."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib

    def list(
        self,
        principal: Principal,
        *,
        tool: str | None = None,
        include_retired: bool = False,
        before: int | None = None,
        limit: int = 20,
    ) -> dict[str, Any]:
        """Verified fixes, newest first: ``{"fixes": [...], "next_before": <id> | None}``."""
        _check_reader(principal)
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInputError(f"limit: use 1 to {MAX_PAGE}, not {limit}")
        query = select(VerifiedFix).order_by(VerifiedFix.id.desc()).limit(limit)
        if tool is not None:
            query = query.where(VerifiedFix.tool == tool)
        if not include_retired:
            query = query.where(VerifiedFix.retired_at.is_(None))
        if before is not None:
            query = query.where(VerifiedFix.id < before)
        with self._lib.sessions() as session:
            rows = list(session.scalars(query))
        return {
            "fixes": [fix_view(row) for row in rows],
            "next_before": rows[-1].id if len(rows) == limit else None,
        }

    def get(self, principal: Principal, fix_id: int) -> dict[str, Any]:
        """One verified fix with the research snippets it came from.

        Raises:
            NotFoundError: no such fix the caller may see.
        """
        _check_reader(principal)
        with self._lib.sessions() as session:
            row = session.get(VerifiedFix, fix_id)
            if row is None:
                raise NotFoundError(f"no verified fix {fix_id}")
            return fix_view(row, with_snippets=True)

    def retire(self, principal: Principal, fix_id: int, reason: str) -> dict[str, Any]:
        """Take a fix that turned out wrong out of reuse, saying why (kept on record).

        Raises:
            InvalidInputError: no reason. NotFoundError: no such fix.
            ForbiddenError: not an administrator of the local organisation.
            ConflictError: already retired.
        """
        _check_reader(principal)
        principal.require(Scope.ADMIN, "retiring verified fixes")
        reason = reason.strip()
        if not reason:
            raise InvalidInputError("reason: say why the fix is wrong", hint="it is kept with the fix")
        with self._lib.sessions.begin() as session:
            if session.get(VerifiedFix, fix_id) is None:
                raise NotFoundError(f"no verified fix {fix_id}")
            # Compare-and-set: two administrators retiring at once record one of them.
            changed = session.execute(
                update(VerifiedFix)
                .where(VerifiedFix.id == fix_id, VerifiedFix.retired_at.is_(None))
                .values(
                    retired_at=utcnow(),
                    retired_by=principal.user_name,
                    retired_reason=reason[:MAX_REASON_CHARS],
                )
            ).rowcount  # type: ignore[attr-defined]
            if not changed:
                raise ConflictError(f"verified fix {fix_id} is already retired")
        return self.get(principal, fix_id)

    def strategy_stats(self, principal: Principal, *, category: str | None = None) -> dict[str, Any]:
        """The policy's record per error category and strategy: trials, mean reward and its lower bound."""
        principal.require(Scope.READ, "reading the strategy policy")
        query = select(StrategyStat).order_by(StrategyStat.error_category, StrategyStat.strategy)
        if category is not None:
            query = query.where(StrategyStat.error_category == category)
        with self._lib.sessions() as session:
            rows = list(session.scalars(query))
        return {
            "strategies": [
                {
                    "error_category": row.error_category,
                    "strategy": row.strategy,
                    "trials": row.trials,
                    "total_reward": round(row.total_reward, 4),
                    "mean_reward": round(row.total_reward / row.trials, 4) if row.trials else None,
                    "last_update": as_utc(row.last_update_timestamp).isoformat(),
                }
                for row in rows
            ]
        }


def fix_view(row: VerifiedFix, *, with_snippets: bool = False) -> dict[str, Any]:
    """A verified fix as the interfaces show it."""
    uses = row.successes + row.failures
    view: dict[str, Any] = {
        "id": row.id,
        "kind": row.kind,
        "tool": row.tool,
        "tool_version": row.tool_version,
        "normalized_error": row.normalized_error,
        "intent": row.intent,
        "failed_template": list(row.failed_template),
        "fixed_template": list(row.fixed_template),
        "strategy": row.strategy,
        "rationale": row.rationale,
        "successes": row.successes,
        "failures": row.failures,
        "success_rate": round(row.successes / uses, 4) if uses else None,
        "confidence_lower_bound": round(wilson_lower_bound(row.successes, row.failures), 4),
        "created_at": as_utc(row.created_at).isoformat(),
        "last_used_at": as_utc(row.last_used_at).isoformat(),
        "last_outcome": row.last_outcome,
        "retired": None
        if row.retired_at is None
        else {"at": as_utc(row.retired_at).isoformat(), "by": row.retired_by, "reason": row.retired_reason},
    }
    if with_snippets:
        view["snippets"] = list(row.snippets or [])
    return view


def _check_reader(principal: Principal) -> None:
    principal.require(Scope.READ, "reading verified fixes")
    if principal.sees_everything or principal.is_operator:
        return
    if principal.organization_id != LOCAL_ORGANIZATION_ID:
        raise ForbiddenError(
            "verified fixes are the runtime's own knowledge, shown to its local organisation only",
            hint="the fixes that apply to your problem reach you through find_solutions",
        )
