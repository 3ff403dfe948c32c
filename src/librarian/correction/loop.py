"""The self-correcting loop: a runtime corrector that fixes API drift from what it learned and from the docs.

For a failed command task (or code task: :mod:`~librarian.correction.code_flow`),
:meth:`SelfCorrectingCorrector.propose` goes through these steps, and writes each one to the workflow's
timeline (:mod:`~librarian.correction.timeline`):

1. **trigger** -- classify the failure with the trigger rules (:mod:`~librarian.correction.triggers`);
   a transient one is retried unchanged; only correctable ones (API drift) go on; others are left to
   other correctors. A task that exited as expected but warned that part of it was ignored arrives
   here too (the evaluator failed it).
2. **stage** -- when the failure is the loop's own earlier correction failing
   (:mod:`~librarian.correction.stages`): a correction that got past its error and met a new one is
   corrected from where it stands (a *chain*, up to ``max_chain`` deep); one that met the same error,
   or whose own additions the tool rejects (which are then *blamed*), was wrong, so the command it
   corrected is corrected again with another candidate (at most ``max_alternatives`` per stage).
3. **version** -- detect the tool's (or package's) version inside the task's own environment.
4. **reuse before research** -- the *session cache* (corrections made earlier in this workflow for the
   same problem), then the *knowledge base* of verified fixes for the problem signature
   (:mod:`~librarian.correction.fixes`). A fix that applies with enough confidence is used without
   any research.
5. **docs** -- when nothing is indexed for the tool at that version, index it now
   (:mod:`~librarian.correction.on_demand`), then load the tool's documented commands (or API).
6. **research** -- ``research_api_usage`` with the detected version and the error text, then the
   offline strategies on the snippets and the documentation (explicit replacement, synopsis rewrite,
   command-line edits; syntax-tree edits for code), and the LLM corrector when one is configured.
7. **choose** -- the best option at or above the confidence threshold, near ties broken by the
   strategy policy; never one already tried from this stage, nor one that brings back what was blamed.
8. **fall back** -- research again with broader terms and ``version='latest'``; then ask the user;
   then escalate with a report (:mod:`~librarian.correction.fallback`).

The chosen correction becomes a plan whose last step retries the failed task with the corrected
command or code (the payload's environment and expectations kept), and a correction attempt is
stored; :func:`~librarian.correction.fixes.learn_from_workflow` (and the loop itself, at its next call
for the workflow) turns the ones that pass the evaluator into verified fixes, a whole chain into one.
Nothing here names a tool, an option, a module or a command.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from librarian.app import Librarian
from librarian.config import Settings
from librarian.correction import code_flow
from librarian.correction.answers import answers_for
from librarian.correction.command_flow import CommandKind, command_failure
from librarian.correction.command_tree import CommandTree
from librarian.correction.escalation import EscalationReport, FailedCommand
from librarian.correction.fallback import ask_user, escalate
from librarian.correction.fixes import AttemptRecord, FixStore, Settlement, learn_from_workflow
from librarian.correction.llm_corrector import LLMCorrector
from librarian.correction.locate import locate_task
from librarian.correction.models import CorrectionAttempt
from librarian.correction.narration import trigger_summary
from librarian.correction.on_demand import DocsOnDemand
from librarian.correction.option_steps import OptionSteps
from librarian.correction.options import CorrectionOption, build_plan
from librarian.correction.problem import problem_of
from librarian.correction.research_step import (
    Researcher,
    used_snippets,
)
from librarian.correction.reuse import knowledge_base_options, session_cache_options
from librarian.correction.stages import SubjectKind, find_stage
from librarian.correction.state import LoopOptions, LoopRun, StepRecorder
from librarian.correction.timeline import record_step
from librarian.correction.tool_docs import load_pages
from librarian.correction.triggers import (
    FailureClass,
    TriggerRule,
    classify_failure,
    default_trigger_rules,
    load_trigger_rules,
)
from librarian.correction.versions import VersionCache
from librarian.errors import InvalidInputError, LibrarianError
from librarian.incidents.investigations import record_escalation, record_fixed
from librarian.llm import LLMClient
from librarian.runtime.correctors import (
    ClarificationRequest,
    CorrectionContext,
    CorrectionProposal,
    Corrector,
    CreateMissingPathCorrector,
)
from librarian.runtime.policy import StrategyPolicy
from librarian.runtime.sandbox import EnvironmentManager
from librarian.runtime.task_env import task_environment
from librarian.storage.database import open_database

__all__ = ["LoopOptions", "SelfCorrectingCorrector", "loop_correctors"]

logger = logging.getLogger(__name__)
# A wait shorter than this is not worth a line in the timeline.
_NOTICEABLE_SECONDS = 0.05
# A runbook must score at least this for an escalation to name it (below, it is noise).
RUNBOOK_MATCH_MINIMUM = 0.3

DEFAULT_EXECUTOR_TYPES = ("command_executor", "code_executor", "file_writer", "api_caller")
_KINDS: dict[str, SubjectKind] = {"command": CommandKind(), "code": code_flow.CodeKind()}


class SelfCorrectingCorrector(OptionSteps):
    """The self-correcting loop as a runtime :class:`~librarian.runtime.correctors.Corrector`.

    Args:
        sessions: session factory of the runtime database (verified fixes, attempts, timeline).
        environment: the sandbox tasks run in (version probes, workspaces).
        librarian: the documentation store to research; ``None`` disables research.
        llm: a chat model for the LLM corrector; ``None`` uses the offline strategies only.
        rules: trigger rules (default: the shipped ones).
        options: thresholds, budgets and fallbacks.
        known_executor_types: executor types a plan may use.
        escalations: directory for escalation reports (default: ``<home>/escalations`` with
            :meth:`from_settings`; ``None`` keeps them in the timeline only).
        versions: the version probe cache (default: a new one over ``environment``).
        policy: the strategy policy whose preferences break near ties.
        feedback_sessions: where successful fixes are recorded as research feedback.

    Example:
        >>> corrector = SelfCorrectingCorrector.from_settings(settings)  # doctest: +SKIP
        >>> with Runtime(settings, correctors=[corrector]) as runtime:  # doctest: +SKIP
        ...     report = runtime.run(spec)
        ...     learn_from_workflow(corrector.sessions, report.workflow_id)
    """

    name = "self_correcting"
    settle_on_finish = False

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        environment: EnvironmentManager,
        librarian: Librarian | None = None,
        llm: LLMClient | None = None,
        rules: Sequence[TriggerRule] | None = None,
        options: LoopOptions | None = None,
        known_executor_types: Collection[str] = DEFAULT_EXECUTOR_TYPES,
        escalations: Path | None = None,
        versions: VersionCache | None = None,
        policy: StrategyPolicy | None = None,
        feedback_sessions: sessionmaker[Session] | None = None,
    ) -> None:
        self.sessions = sessions
        self.environment = environment
        self.librarian = librarian
        self.researcher = Researcher(librarian)
        self.llm = LLMCorrector(llm, known_executor_types=known_executor_types) if llm is not None else None
        self.rules = list(rules) if rules is not None else default_trigger_rules()
        self.options = options or LoopOptions()
        self.escalations = escalations
        self.versions = versions or VersionCache(environment)
        self.policy = policy or StrategyPolicy()
        self.on_demand = DocsOnDemand(librarian, enabled=self.options.index_on_demand)
        self.fixes = FixStore(
            sessions,
            workspaces=environment.root,
            feedback_sessions=feedback_sessions,
            policy=self.policy,
            actor=self.name,
            on_settled=self.investigation_settled,
        )
        self._engine: Engine | None = None
        self._owned_librarian: Librarian | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        librarian: Librarian | None = None,
        llm: LLMClient | None = None,
        options: LoopOptions | None = None,
        rules: Sequence[TriggerRule] | None = None,
        sessions: sessionmaker[Session] | None = None,
    ) -> SelfCorrectingCorrector:
        """The loop on the runtime database and sandbox ``settings`` name.

        ``sessions`` reuses an open connection to that same database (the caller keeps owning it);
        without it the corrector opens, and later closes, its own.

        ``librarian`` is the documentation store to research (``None``: no research); ``llm``
        defaults to the store's configured LLM. Trigger rules are the shipped ones plus the
        ``correction_trigger_files`` settings names; the threshold, the budgets, whether to ask the
        user and whether to index documentation on demand come from the ``correction_*`` settings
        unless ``options`` is given.
        """
        if rules is None and settings.correction_trigger_files:
            rules = load_trigger_rules(settings.correction_trigger_files)
        if options is None:
            options = LoopOptions(
                threshold=settings.correction_confidence_threshold,
                ask_user=settings.correction_ask_user,
                max_chain=settings.correction_max_chain,
                max_alternatives=settings.correction_max_alternatives,
                index_on_demand=settings.correction_index_on_demand,
            )
        engine = None
        if sessions is None:
            engine, sessions = open_database(settings.resolved_database_url)
        corrector = cls(
            sessions=sessions,
            environment=EnvironmentManager.from_settings(settings),
            librarian=librarian,
            llm=llm if llm is not None else (librarian.llm if librarian is not None else None),
            rules=rules,
            options=options,
            escalations=settings.home / "escalations",
            feedback_sessions=librarian.sessions if librarian is not None else None,
        )
        corrector._engine = engine
        return corrector

    def workflow_finished(self, workflow_id: str) -> None:
        """Settle a finished workflow's corrections (the runtime calls this after the ending commit).

        Only when ``settle_on_finish`` is set, as :func:`loop_correctors` (``librarian worker``,
        ``librarian workflow run``) does: a caller that settles itself to report what was learned
        (the demo) keeps that job. Settling is idempotent either way.
        """
        if not self.settle_on_finish:
            return
        learn_from_workflow(
            self.sessions,
            workflow_id,
            workspaces=self.environment.root,
            feedback_sessions=self.fixes.feedback_sessions,
            on_settled=self.investigation_settled,
        )

    def investigation_settled(self, settlement: Settlement, attempt: CorrectionAttempt) -> None:
        """Save a failure this loop fixed as an incident (see :mod:`librarian.incidents.investigations`)."""
        if self.librarian is not None and settlement.outcome == "succeeded":
            record_fixed(self.librarian, attempt, settlement)

    def investigation_escalated(self, report: EscalationReport) -> None:
        """Save an escalated failure as an incident whose fix is still unknown."""
        if self.librarian is not None:
            record_escalation(self.librarian, report)

    def matching_runbooks(self, problem: str) -> list[dict[str, Any]]:
        """The runbooks of the local organisation that match an escalated failure (best three)."""
        if self.librarian is None:
            return []
        try:
            matches = self.librarian.runbooks.match(
                self.librarian.default_principal, problem[:4000], limit=3, minimum=RUNBOOK_MATCH_MINIMUM
            )
        except LibrarianError as exc:
            logger.warning("could not look for runbooks matching the failure: %s", exc.message)
            return []
        return [{key: match[key] for key in ("id", "name", "score", "reasons", "url")} for match in matches]

    def close(self) -> None:
        """Release what :meth:`from_settings` and :func:`loop_correctors` opened."""
        if self._engine is not None:
            self._engine.dispose()
        if self._owned_librarian is not None:
            self._owned_librarian.close()

    # -- the loop ---------------------------------------------------------------------------------

    def propose(self, context: CorrectionContext) -> CorrectionProposal | ClarificationRequest | None:
        """A corrective plan for ``context``'s failed task, a question for the user, or ``None``."""
        run = self._start(context)
        if run is None:
            return None
        step = self._stepper(run)
        run.trigger = self._classify(
            run.subject, run.kind, run.exit_code, run.stderr, run.stdout, run.succeeded
        )
        step("trigger", trigger_summary(run.trigger), run.trigger.to_dict())
        if run.trigger.category == "transient" and self.options.retry_transient:
            return self._retry_unchanged(run, step)
        if not self._stage(run, step):
            return None
        assert run.stage is not None and run.trigger is not None
        if not run.trigger.correctable:
            return None
        if run.stage.exhausted:
            escalate(self, run, step, reason=f"every correction budget is spent: {run.stage.note}")
            return None
        self._detect_version(run, step)
        for option_source in (session_cache_options, knowledge_base_options):
            chosen = self._choose(run, option_source(self.fixes, run, self.options, step, self._learned))
            if chosen is not None:
                return self._apply(run, chosen, step)
        self._load_docs(run, step)
        answers = answers_for(run.context, self.name)
        if answers:
            # The user answered our question: what they said leads; the research already done
            # the first time is not repeated.
            chosen = self._use_answers(run, step, answers)
        else:
            version = run.version.version if run.version else None
            chosen = self._research_and_choose(run, step, version, broad=False)
            if chosen is None and self.options.broaden:
                chosen = self._research_and_choose(run, step, "latest", broad=True)
            if chosen is None and self.options.ask_user:
                return ask_user(self, run, step)
        if chosen is not None:
            return self._apply(run, chosen, step)
        escalate(self, run, step)
        return None

    # -- steps ------------------------------------------------------------------------------------

    def _start(self, context: CorrectionContext) -> LoopRun | None:
        """The failure as the loop reads it, or ``None`` when it is not a command or code task."""
        command = command_failure(context.failed)
        code = None if command is not None else code_flow.code_failure(context.failed)
        if command is None and code is None:
            return None
        location = locate_task(self.sessions, context)
        if command is not None:
            run = LoopRun(
                context=context,
                kind="command",
                subject=command.argv,
                exit_code=command.exit_code,
                stderr=command.stderr,
                stdout=command.stdout,
                location=location,
                succeeded=command.succeeded,
                tool=command.tool,
                program=command.program,
            )
        else:
            assert code is not None
            run = LoopRun(
                context=context,
                kind="code",
                subject=code.code,
                exit_code=code.exit_code,
                stderr=code.stderr,
                stdout=code.stdout,
                location=location,
                succeeded=code.succeeded,
                details=code,
            )
        run.workspace = self.environment.workspace_for(
            str(location.workflow_id) if location is not None else "librarian-probe"
        )
        try:
            run.task_env = task_environment(context.failed.payload, run.workspace.root, self.environment.path)
        except InvalidInputError:
            return None  # a malformed environment is the payload's problem, not drift
        if run.kind == "code":
            code_flow.identify(run, self.environment)
        return run

    def _classify(
        self, subject: Any, kind: str, exit_code: int | None, stderr: str, stdout: str, succeeded: bool
    ) -> FailureClass:
        argv = list(subject) if kind == "command" else ["python"]
        # A run that "succeeded" with a non-zero expected code was failed for drift, not a warning.
        warned = succeeded and not exit_code
        return classify_failure(argv, exit_code or 0, stderr, stdout, rules=self.rules, succeeded=warned)

    def _stage(self, run: LoopRun, step: StepRecorder) -> bool:
        """Place the failure among the task's earlier corrections; ``False`` when it is not the loop's."""
        attempts = []
        if run.location is not None:
            # What earlier corrections of this workflow led to is decided by now: learn it first.
            self.fixes.settle(run.location.workflow_id)
            attempts = [a for a in self.fixes.attempts(run.location.workflow_id, run.location.task_id)]
        for attempt in attempts:
            if attempt.kind == run.kind and all(f.key != _subject_key(attempt) for f in run.history):
                run.history.append(_failed_command(attempt))
        kind = _KINDS[run.kind]

        def is_drift(output: str, exit_code: int | None) -> bool:
            found = self._classify(run.subject, run.kind, exit_code, output, "", run.succeeded)
            return found.correctable

        stage = find_stage(
            attempts,
            kind,
            run.subject,
            run.stderr,
            run.stdout,
            run.exit_code,
            is_drift=is_drift,
            max_chain=self.options.max_chain,
            max_alternatives=self.options.max_alternatives,
        )
        run.stage = stage
        run.history.append(FailedCommand(run.argv, run.exit_code, run.stderr, run.stdout, code=run.code))
        if stage.newly_blamed is not None:
            self.fixes.blame(*stage.newly_blamed)
        if stage.relation == "first" and not stage.exhausted:
            return True
        step(
            "stage",
            f"{stage.relation}: {stage.note}",
            {
                "relation": stage.relation,
                "depth": stage.depth,
                "tried": len(stage.tried),
                "blamed": sorted(stage.blamed),
                "exhausted": stage.exhausted,
                "parent_attempt": stage.parent.id if stage.parent is not None else None,
            },
        )
        if stage.relation == "setback":
            run.subject = stage.subject
            run.stderr, run.stdout, run.exit_code = stage.stderr, stage.stdout, stage.exit_code
            run.succeeded = False
            run.trigger = self._classify(run.subject, run.kind, run.exit_code or 1, run.stderr, "", False)
            if run.kind == "code":
                code_flow.identify(run, self.environment)
        return True

    def _detect_version(self, run: LoopRun, step: StepRecorder) -> None:
        workspace = run.workspace or self.environment.workspace_for("librarian-probe")
        if run.kind == "code":
            code_flow.detect_version(run, self.environment, step)
        else:
            run.version, cached = self.versions.detect(run.program, workspace, run.task_env)
            version = run.version.version if run.version else None
            shown = shlex.join(run.program)
            step(
                "version",
                f"{shown} is version {version}"
                + (" (remembered)" if cached else "")
                + " in the task's environment"
                if version
                else f"no version could be read from {shown} in the task's environment",
                {"version": version, "raw": run.version.raw if run.version else "", "cached": cached},
            )
        version = run.version.version if run.version else None
        if run.kind == "code":
            run.problem = code_flow.problem(run)
        else:
            run.problem = problem_of(run.argv, run.output, version)

    def _load_docs(self, run: LoopRun, step: StepRecorder) -> None:
        """Index the tool at its version when it is missing, then load its documented commands or API."""
        if self.librarian is None:
            return
        waited = self.librarian.wait_until_warm()
        if waited >= _NOTICEABLE_SECONDS:
            step(
                "warm_up",
                f"waited {waited:.1f} s for the embedding model to load (once per process)",
                {"seconds": round(waited, 3)},
            )
        version = run.version.version if run.version else None
        path = run.task_env.path(self.environment.path)
        if run.kind == "code":
            found = code_flow.ensure_docs(run, self.on_demand)
        else:
            found = self.on_demand.command(run.tool, run.program, version, path)
        if found.indexed or found.error:
            step(
                "docs",
                found.summary if not found.error else f"indexing on demand failed: {found.error}",
                {"indexed": found.indexed, "seconds": round(found.seconds, 3), "error": found.error},
            )
        run.docs_sdk = found.sdk_name
        try:
            pages = load_pages(self.librarian, found.sdk_name, found.version)
        except LibrarianError:
            pages = []
        if run.kind == "code":
            run.pages = pages
        else:
            run.tree = CommandTree.from_snippets(page.as_snippet() for page in pages)

    def _apply(self, run: LoopRun, option: CorrectionOption, step: StepRecorder) -> CorrectionProposal:
        failed = run.context.failed
        assert run.problem is not None and run.trigger is not None and run.stage is not None
        payload = dict(failed.payload)
        payload["argv" if run.kind == "command" else "code"] = run.subject
        plan = build_plan(option, task_key=failed.key, executor_type=failed.executor_type, payload=payload)
        research_calls = len(run.research)
        stage = run.stage
        if run.location is not None:
            self.fixes.record_attempt(
                AttemptRecord(
                    workflow_id=run.location.workflow_id,
                    task_id=run.location.task_id,
                    task_key=failed.key,
                    problem=run.problem,
                    trigger_category=run.trigger.category,
                    error_text=run.output,
                    exit_code=run.exit_code,
                    failed_argv=run.argv,
                    corrected_argv=list(option.argv) if run.kind == "command" else [],
                    strategy=option.strategy,
                    source=option.source,
                    confidence=option.confidence,
                    rationale=option.rationale,
                    fix_id=option.fix_id,
                    snippets=used_snippets(option.evidence.get("entity_name"), run.research),
                    research_calls=research_calls,
                    failed_at=run.location.failed_at,
                    kind=run.kind,
                    failed_code=run.code,
                    corrected_code=option.code,
                    edits=list(option.edits),
                    chain_parent_id=stage.parent.id if stage.parent is not None else None,
                    depth=stage.depth,
                )
            )
            # The earlier attempt this one continues or replaces now has its verdict.
            self.fixes.settle(run.location.workflow_id)
        seconds = time.perf_counter() - run.started
        step(
            "correction",
            f"{option.strategy} ({option.source}, confidence {option.confidence:.2f}): "
            f"`{option.shown}` -- {option.rationale}",
            {
                **option.to_dict(),
                "failed_argv": run.argv,
                "research_calls": research_calls,
                "loop_seconds": round(seconds, 4),
                "depth": stage.depth,
            },
        )
        return CorrectionProposal(
            strategy=self.name,
            plan=plan,
            rationale=(
                f"{option.strategy} via {option.source} (confidence {option.confidence:.2f}): "
                + option.rationale
            ),
        )

    def _retry_unchanged(self, run: LoopRun, step: StepRecorder) -> CorrectionProposal:
        failed = run.context.failed
        option = CorrectionOption(
            argv=run.argv,
            strategy="retry",
            source="trigger",
            confidence=1.0,
            rationale="the failure is transient; the same command may succeed now",
            code=run.code,
        )
        step("correction", "transient failure: retry unchanged", option.to_dict())
        plan = build_plan(
            option, task_key=failed.key, executor_type=failed.executor_type, payload=failed.payload
        )
        return CorrectionProposal(strategy=self.name, plan=plan, rationale=option.rationale)

    # -- helpers ----------------------------------------------------------------------------------

    def _stepper(self, run: LoopRun) -> StepRecorder:
        location = run.location

        def step(stage: str, summary: str, data: dict[str, Any] | None = None) -> None:
            logger.info("correction %s of %s: %s", stage, run.context.failed.key, summary)
            if location is None:
                return
            record_step(
                self.sessions,
                workflow_id=location.workflow_id,
                task_id=location.task_id,
                stage=stage,
                summary=summary,
                actor=self.name,
                data={**(data or {}), "elapsed_seconds": round(time.perf_counter() - run.started, 4)},
            )

        return step


def _subject_key(attempt: Any) -> Any:
    return attempt.failed_code if attempt.kind == "code" else tuple(attempt.failed_argv)


def _failed_command(attempt: Any) -> FailedCommand:
    return FailedCommand(
        list(attempt.failed_argv), attempt.exit_code, attempt.error_text, code=attempt.failed_code
    )


def loop_correctors(settings: Settings | None = None, *, library: Librarian | None = None) -> list[Corrector]:
    """The runtime's correction strategies with the loop first, researching the store ``settings`` name.

    For ``librarian worker --correctors librarian.correction.loop:loop_correctors`` (``settings``
    default to :meth:`Settings.load`) and for ``Runtime(settings, correctors=loop_correctors(settings))``.
    The loop retries transient failures itself, so the plain retry strategy is not included (the
    policy would try it on API drift too); the missing-path strategy is.
    """
    settings = settings or Settings.load()
    owned = library is None
    library = library or Librarian(settings)
    # The first research of a process would otherwise wait for the embedding model to load.
    library.start_warm_up()
    # The store and the runtime share settings.resolved_database_url: one connection pool serves both.
    corrector = SelfCorrectingCorrector.from_settings(settings, librarian=library, sessions=library.sessions)
    if owned:  # closed with the corrector; a library passed in belongs to the caller
        corrector._owned_librarian = library
    # Workers have no caller waiting to settle: verified fixes are learned when workflows finish.
    corrector.settle_on_finish = True
    from librarian.discovery.workflow_tasks import NovelVerbCorrector

    return [corrector, CreateMissingPathCorrector(), NovelVerbCorrector(library)]
