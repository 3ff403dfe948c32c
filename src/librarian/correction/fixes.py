"""The knowledge base of verified fixes, and how a correction's outcome turns into one.

**Reuse.** :meth:`FixStore.lookup` returns the verified fixes of a problem (same tool, intent and
normalized error; the same version first, other versions marked as such), in the form the
``learned_fix`` strategy applies to a new failure's values.

**Learning.** The loop records every correction it proposes as a :class:`CorrectionAttempt`. An
attempt is *settled* from the runtime's event log, which is the truth about what ran:

1. the surgery that applied it (a ``surgery`` event whose retry payload is the corrected command) --
   without one the plan was never applied (``not_applied``: nothing is learned or blamed);
2. the first result of the retried task after that surgery: a failure settles it ``failed``;
3. after a success, the tasks that depend on the corrected one (the workflow's verification): when
   all of them succeed the attempt is ``succeeded``; when the workflow ends with one of them not
   succeeded it is ``failed``; until then it waits.

A succeeded attempt is saved as a verified fix under its problem signature (or adds a success to the
fix it reused), with the research snippets it came from; a failed one adds a failure to the fix it
reused. Either way the retry's reward is added to the runtime's strategy statistics under the
trigger category and the loop's inner strategy (``api_drift`` / ``synopsis_rewrite``), so the policy
learns which strategies pay; and a success is reported as helpful research feedback for the snippet
it used, so research ranks that snippet higher for the same error.

Who settles: the loop settles the attempts of a workflow every time it is asked to correct a task
of that workflow, and the caller of a workflow calls :func:`learn_from_workflow` when it ends (the
demo does; so should anything that runs workflows with the loop). Settling is idempotent and safe
to run concurrently (each attempt moves out of ``proposed`` with a compare-and-set).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shlex
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from librarian.correction.attempt_verdict import attempt_verdict
from librarian.correction.fix_records import AttemptRecord, KnownFix, Settlement
from librarian.correction.fix_templates import make_fix_template
from librarian.correction.models import ERROR_TEXT_CHARS, CorrectionAttempt, VerifiedFix
from librarian.correction.problem import Problem
from librarian.correction.timeline import record_step
from librarian.errors import LibrarianError
from librarian.research.feedback import record_feedback
from librarian.research.scrub import scrub
from librarian.runtime import store
from librarian.runtime.policy import StrategyPolicy
from librarian.storage.models import as_utc, utcnow

__all__ = [
    "AttemptRecord",
    "FixStore",
    "KnownFix",
    "Settlement",
    "learn_from_workflow",
]

logger = logging.getLogger(__name__)
_PROPOSED = "proposed"


class FixStore:
    """Verified fixes and correction attempts in the runtime's database.

    Args:
        sessions: session factory of the runtime database (migration 0005 creates the tables).
        workspaces: the directory holding workflow workspaces, so that a learned template recognises
            the files a failed command named; ``None`` classifies values by shape only.
        feedback_sessions: session factory of the documentation store, to record a successful fix's
            snippet as helpful research feedback; ``None`` records none.
        policy: the strategy policy that receives rewards (default UCB1 policy).
        actor: the name written in timeline events.
        on_settled: called with each settlement and its attempt after the verdict is committed (the
            loop saves fixed failures as incidents there); its errors are logged, never raised.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        workspaces: Path | None = None,
        feedback_sessions: sessionmaker[Session] | None = None,
        policy: StrategyPolicy | None = None,
        actor: str = "correction-loop",
        on_settled: Callable[[Settlement, CorrectionAttempt], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.workspaces = workspaces
        self.feedback_sessions = feedback_sessions
        self.policy = policy or StrategyPolicy()
        self.actor = actor
        self.on_settled = on_settled

    # -- reuse ------------------------------------------------------------------------------------

    def lookup(self, problem: Problem, *, limit: int = 10) -> list[KnownFix]:
        """Verified fixes of ``problem``: the same version first, then other versions; best record first."""
        query = (
            select(VerifiedFix)
            .where(
                VerifiedFix.tool == problem.tool,
                VerifiedFix.intent == problem.intent,
                VerifiedFix.normalized_error == problem.normalized_error,
                VerifiedFix.retired_at.is_(None),  # retired: found wrong by a person, never reused
            )
            .order_by((VerifiedFix.successes - VerifiedFix.failures).desc(), VerifiedFix.id)
        )
        with self.sessions() as session:
            rows = list(session.scalars(query.limit(limit * 4)))
        found = [
            KnownFix(
                fix_id=row.id,
                same_version=row.signature == problem.signature,
                tool_version=row.tool_version,
                entry={
                    "id": row.id,
                    "kind": row.kind,
                    "signature": row.signature,
                    "failed_argv_template": list(row.failed_template),
                    "fixed_argv_template": list(row.fixed_template),
                    "successes": row.successes,
                    "failures": row.failures,
                    "strategy": row.strategy,
                },
                snippets=list(row.snippets or []),
            )
            for row in rows
        ]
        found.sort(key=lambda fix: not fix.same_version)
        return found[:limit]

    def fix(self, fix_id: int) -> VerifiedFix | None:
        """One verified fix by id (a detached copy)."""
        with self.sessions() as session:
            return session.get(VerifiedFix, fix_id)

    def fixes(self, tool: str | None = None) -> list[VerifiedFix]:
        """Every verified fix (of ``tool``), newest first."""
        query = select(VerifiedFix).order_by(VerifiedFix.id.desc())
        if tool is not None:
            query = query.where(VerifiedFix.tool == tool)
        with self.sessions() as session:
            return list(session.scalars(query))

    # -- attempts ---------------------------------------------------------------------------------

    def record_attempt(self, record: AttemptRecord) -> int:
        """Store a correction about to be proposed; returns its id."""
        problem = record.problem
        attempt = CorrectionAttempt(
            workflow_id=record.workflow_id,
            task_id=record.task_id,
            task_key=record.task_key,
            signature=problem.signature,
            tool=problem.tool,
            tool_version=problem.version,
            normalized_error=problem.normalized_error,
            error_text=scrub(record.error_text)[-ERROR_TEXT_CHARS:],
            exit_code=record.exit_code,
            intent=problem.intent,
            trigger_category=record.trigger_category,
            failed_argv=list(record.failed_argv),
            corrected_argv=list(record.corrected_argv),
            strategy=record.strategy,
            source=record.source,
            confidence=record.confidence,
            rationale=record.rationale,
            fix_id=record.fix_id,
            snippets=record.snippets,
            research_calls=record.research_calls,
            failed_at=record.failed_at,
            proposed_at=utcnow(),
            outcome=_PROPOSED,
            kind=record.kind,
            failed_code=record.failed_code,
            corrected_code=record.corrected_code,
            edits=list(record.edits),
            chain_parent_id=record.chain_parent_id,
            depth=record.depth,
        )
        with self.sessions.begin() as session:
            session.add(attempt)
            session.flush()
            return attempt.id

    def blame(self, attempt_id: int, tokens: Sequence[str]) -> None:
        """Record what an attempt introduced that the tool then rejected (never proposed again)."""
        with self.sessions.begin() as session:
            attempt = session.get(CorrectionAttempt, attempt_id)
            if attempt is not None:
                attempt.blamed = sorted({*(attempt.blamed or ()), *tokens})

    def attempts(self, workflow_id: uuid.UUID, task_id: uuid.UUID | None = None) -> list[CorrectionAttempt]:
        """The attempts made in a workflow (for one task), oldest first."""
        query = select(CorrectionAttempt).where(CorrectionAttempt.workflow_id == workflow_id)
        if task_id is not None:
            query = query.where(CorrectionAttempt.task_id == task_id)
        with self.sessions() as session:
            return list(session.scalars(query.order_by(CorrectionAttempt.id)))

    # -- learning ---------------------------------------------------------------------------------

    def settle(self, workflow_id: uuid.UUID | None = None) -> list[Settlement]:
        """Settle every attempt (of ``workflow_id``) whose outcome the event log now shows."""
        query = select(CorrectionAttempt.id).where(CorrectionAttempt.outcome == _PROPOSED)
        if workflow_id is not None:
            query = query.where(CorrectionAttempt.workflow_id == workflow_id)
        with self.sessions() as session:
            pending = list(session.scalars(query.order_by(CorrectionAttempt.id)))
        settled: list[Settlement] = []
        for attempt_id in pending:
            result = self._settle_one(attempt_id)
            if result is not None:
                settled.append(result)
                self._after(result)
        return settled

    def _settle_one(self, attempt_id: int) -> Settlement | None:
        with self.sessions.begin() as session:
            attempt = session.get(CorrectionAttempt, attempt_id)
            if attempt is None or attempt.outcome != _PROPOSED:
                return None
            verdict = attempt_verdict(session, attempt)
            if verdict is None:
                return None
            outcome, reward, succeeded_at = verdict
            won = session.execute(
                update(CorrectionAttempt)
                .where(CorrectionAttempt.id == attempt_id, CorrectionAttempt.outcome == _PROPOSED)
                .values(outcome=outcome, settled_at=utcnow(), reward=reward)
                .execution_options(synchronize_session=False)
            )
            if won.rowcount != 1:  # type: ignore[attr-defined]
                return None  # settled concurrently by someone else
            fix: VerifiedFix | None = None
            chain_fix: VerifiedFix | None = None
            new_fix = False
            if outcome == "succeeded":
                fix, new_fix = self._count_success(session, attempt)
                chain_fix = self._count_chain(session, attempt)
            elif outcome == "failed":
                fix = self._count_failure(session, attempt)
            if outcome in ("succeeded", "failed") and reward is not None:
                self.policy.record(session, attempt.trigger_category, attempt.strategy, reward)
            seconds = None
            if succeeded_at is not None and attempt.failed_at is not None:
                seconds = max(0.0, (as_utc(succeeded_at) - as_utc(attempt.failed_at)).total_seconds())
            return Settlement(
                attempt_id=attempt.id,
                workflow_id=str(attempt.workflow_id),
                task_key=attempt.task_key,
                outcome=outcome,
                strategy=attempt.strategy,
                source=attempt.source,
                corrected_argv=list(attempt.corrected_argv),
                fix_id=fix.id if fix is not None else None,
                new_fix=new_fix,
                successes=fix.successes if fix is not None else 0,
                failures=fix.failures if fix is not None else 0,
                reward=reward,
                correction_seconds=seconds,
                chain_fix_id=chain_fix.id if chain_fix is not None else None,
                shown=_shown(attempt),
            )

    def _count_success(self, session: Session, attempt: CorrectionAttempt) -> tuple[VerifiedFix, bool]:
        failed, fixed = self._template(attempt, attempt, [dict(e) for e in attempt.edits or []])
        return self._save_success(
            session, attempt, attempt, failed, fixed, attempt.strategy, attempt.rationale
        )

    def _count_chain(self, session: Session, last: CorrectionAttempt) -> VerifiedFix | None:
        """For the end of a chain: save the whole chain as one fix of the first failure's problem.

        The next time the task's original command fails the same way, that fix goes straight to the
        command that finally worked, without the intermediate failures or any research.
        """
        chain = [last]
        while chain[-1].chain_parent_id is not None and len(chain) < 50:
            parent = session.get(CorrectionAttempt, chain[-1].chain_parent_id)
            if parent is None:
                break
            chain.append(parent)
        if len(chain) == 1:
            return None
        root = chain[-1]
        edits = [dict(edit) for attempt in reversed(chain) for edit in attempt.edits or []]
        failed, fixed = self._template(root, last, edits)
        steps = " -> ".join(attempt.strategy for attempt in reversed(chain))
        rationale = f"a chain of {len(chain)} corrections ({steps}), each past the error of the one before"
        fix, _ = self._save_success(session, root, last, failed, fixed, "chain", rationale)
        return fix

    def _template(
        self, first: CorrectionAttempt, last: CorrectionAttempt, edits: list[dict[str, Any]]
    ) -> tuple[list[Any], list[Any]]:
        """The failed and fixed templates from ``first``'s failure to ``last``'s correction."""
        if first.kind == "code":
            return [], edits
        workspace = self.workspaces / str(first.workflow_id) if self.workspaces else None
        template = make_fix_template(first.failed_argv, last.corrected_argv, workspace)
        return list(template.failed), list(template.fixed)

    def _save_success(
        self,
        session: Session,
        problem: CorrectionAttempt,
        last: CorrectionAttempt,
        failed: list[Any],
        fixed: list[Any],
        strategy: str,
        rationale: str,
    ) -> tuple[VerifiedFix, bool]:
        """Count a success on the fix ``(failed, fixed)`` of ``problem``'s signature, saving it if new."""
        key = _template_key(failed, fixed)
        fix = self._fix_for(session, problem, key, reused=last.fix_id if problem is last else None)
        created = False
        if fix is None:
            fix = VerifiedFix(
                signature=problem.signature,
                kind=problem.kind,
                tool=problem.tool,
                tool_version=problem.tool_version,
                normalized_error=problem.normalized_error,
                intent=problem.intent,
                template_key=key,
                failed_template=failed,
                fixed_template=fixed,
                strategy=strategy,
                rationale=rationale,
                snippets=list(last.snippets or []),
                successes=0,
                failures=0,
                created_at=utcnow(),
            )
            try:
                with session.begin_nested():
                    session.add(fix)
            except IntegrityError:
                # Saved concurrently by another settler: count on that row instead.
                fix = self._fix_for(session, problem, key)
                if fix is None:
                    raise
            else:
                created = True
        _count_outcome(session, fix, "succeeded")
        return fix, created

    def _count_failure(self, session: Session, attempt: CorrectionAttempt) -> VerifiedFix | None:
        fix = session.get(VerifiedFix, attempt.fix_id) if attempt.fix_id is not None else None
        if fix is None:
            return None
        _count_outcome(session, fix, "failed")
        return fix

    def _fix_for(
        self, session: Session, problem: CorrectionAttempt, key: str, *, reused: int | None = None
    ) -> VerifiedFix | None:
        """The stored fix ``key`` of ``problem``'s signature (the ``reused`` one, when it is that fix)."""
        if reused is not None:
            fix = session.get(VerifiedFix, reused)
            if fix is not None and fix.signature == problem.signature and fix.template_key == key:
                return fix
        return session.scalar(
            select(VerifiedFix).where(
                VerifiedFix.signature == problem.signature, VerifiedFix.template_key == key
            )
        )

    def _after(self, settlement: Settlement) -> None:
        """Timeline and research feedback, outside the settling transaction (neither may undo it)."""
        with self.sessions() as session:
            attempt = session.get(CorrectionAttempt, settlement.attempt_id)
        if attempt is None:
            return
        record_step(
            self.sessions,
            workflow_id=attempt.workflow_id,
            task_id=attempt.task_id,
            stage="learned" if settlement.outcome == "succeeded" else f"fix_{settlement.outcome}",
            summary=_settlement_summary(settlement),
            actor=self.actor,
            data=settlement.to_dict(),
        )
        if self.on_settled is not None:
            try:
                self.on_settled(settlement, attempt)
            except LibrarianError:
                logger.warning("could not record what attempt %s taught", attempt.id)
        if settlement.outcome == "succeeded" and self.feedback_sessions is not None and attempt.error_text:
            for snippet in [s for s in attempt.snippets or [] if s.get("used")]:
                try:
                    record_feedback(
                        self.feedback_sessions,
                        sdk_name=str(snippet.get("sdk_name") or attempt.tool),
                        error_text=attempt.error_text,
                        source_url=str(snippet.get("source_url") or ""),
                        entity_name=snippet.get("entity_name"),
                        sdk_version=snippet.get("sdk_version"),
                        command=shlex.join(attempt.failed_argv),
                        helpful=True,
                    )
                except LibrarianError:
                    # Feedback sharpens later research; the fix is learned either way.
                    logger.warning("could not record research feedback for attempt %s", attempt.id)


def learn_from_workflow(
    sessions: sessionmaker[Session],
    workflow_id: str | uuid.UUID,
    *,
    workspaces: Path | None = None,
    feedback_sessions: sessionmaker[Session] | None = None,
    policy: StrategyPolicy | None = None,
    on_settled: Callable[[Settlement, CorrectionAttempt], None] | None = None,
) -> list[Settlement]:
    """Settle a workflow's correction attempts: verified fixes, counts, rewards (see the module docs).

    Call it when the workflow has ended (``Runtime.run`` returned); calling it earlier settles what is
    already decided and leaves the rest for later.

    Raises:
        NotFoundError: no such workflow. InvalidInputError: not a workflow id.
    """
    with sessions() as session:
        workflow = store.get_workflow(session, workflow_id)
    fixes = FixStore(
        sessions,
        workspaces=workspaces,
        feedback_sessions=feedback_sessions,
        policy=policy,
        on_settled=on_settled,
    )
    return fixes.settle(workflow.workflow_id)


# -- verdicts ------------------------------------------------------------------------------------


def _count_outcome(session: Session, fix: VerifiedFix, outcome: Literal["succeeded", "failed"]) -> None:
    """Add one success or failure to ``fix``, counted by the database.

    ``successes = successes + 1`` in SQL rather than a read-modify-write of the loaded row: two
    settlers counting on the same fix at once would otherwise lose one of the counts.
    """
    counter = VerifiedFix.successes if outcome == "succeeded" else VerifiedFix.failures
    session.flush()  # a fix created by this settler must exist before it is counted
    session.execute(
        update(VerifiedFix)
        .where(VerifiedFix.id == fix.id)
        .values({counter: counter + 1, VerifiedFix.last_used_at: utcnow(), VerifiedFix.last_outcome: outcome})
        .execution_options(synchronize_session=False)
    )
    session.refresh(fix)  # the settlement reports the counts the database now holds


def _template_key(failed: Sequence[str], fixed: Sequence[str]) -> str:
    text = json.dumps([list(failed), list(fixed)], separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _shown(attempt: CorrectionAttempt) -> str:
    """What an attempt ran, for a person: its command line, or the edits it made to the code."""
    if attempt.kind != "code":
        return shlex.join(attempt.corrected_argv)
    described = [str(edit.get("summary") or "") for edit in attempt.edits or []]
    return "; ".join(d for d in described if d) or "the corrected code"


def _settlement_summary(settlement: Settlement) -> str:
    command = settlement.shown or shlex.join(settlement.corrected_argv)
    if settlement.outcome == "succeeded":
        what = (
            "saved as a new verified fix" if settlement.new_fix else "one more success for the verified fix"
        )
        chain = (
            f"; the whole chain from the first failure is verified fix #{settlement.chain_fix_id}"
            if settlement.chain_fix_id is not None
            else ""
        )
        return (
            f"`{command}` passed the evaluator and the tasks after it: {what} #{settlement.fix_id} "
            f"({settlement.successes} successes, {settlement.failures} failures); strategy "
            f"{settlement.strategy!r} rewarded {settlement.reward:+.2f}{chain}"
            if settlement.reward is not None
            else f"`{command}` passed: {what} #{settlement.fix_id}{chain}"
        )
    if settlement.outcome == "failed":
        counted = (
            f"; verified fix #{settlement.fix_id} now has {settlement.failures} failures"
            if settlement.fix_id is not None
            else ""
        )
        return f"`{command}` did not solve the problem{counted}"
    if settlement.outcome == "continued":
        return f"`{command}` got past its error and met another, which the next correction answers"
    return f"`{command}` was never applied (another plan was used, or the workflow ended first)"
