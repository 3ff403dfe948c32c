"""The self-correcting loop: a runtime corrector that fixes API drift from what it learned and from the docs.

For a failed command task, :meth:`SelfCorrectingCorrector.propose` goes through these steps, and writes
each one to the workflow's timeline (:mod:`~librarian.correction.timeline`):

1. **trigger** -- classify the failure with the trigger rules (:mod:`~librarian.correction.triggers`);
   a transient one is retried unchanged; only correctable ones (API drift) go on; others are left to
   other correctors. When the failing command is the loop's own earlier correction of this task, that
   correction is recorded as failed and the *original* command is corrected again, never with a
   command already tried.
2. **version** -- detect the tool's version inside the task's sandbox (``TOOL --version``...).
3. **reuse before research** -- the *session cache* (corrections made earlier in this workflow for the
   same tool, intent, version and error), then the *knowledge base* of verified fixes for the problem
   signature (:mod:`~librarian.correction.fixes`). A fix that applies with enough confidence is used
   without any research.
4. **research** -- ``research_api_usage`` with the detected version and the error text, then the
   offline strategies (explicit replacement, synopsis rewrite) on the snippets, and the LLM corrector
   when an LLM is configured.
5. **choose** -- the best option at or above the confidence threshold, near ties broken by the
   strategy policy; never a command already tried for this task.
6. **fall back** -- research again with broader terms and ``version='latest'``; then ask the user a
   question (a :class:`~librarian.runtime.correctors.ClarificationRequest`: the workflow pauses until
   ``librarian workflow answer``); with the answer, the loop takes a command line the user typed, or
   researches and reads their words as it reads an error message ("use X instead"); when even that
   gives nothing, it escalates: an escalation report (Markdown and JSON) is written, and the corrector
   gives up so that the workflow ends with a report instead of a guess.

The chosen correction becomes a plan whose last step retries the failed task with the corrected
command (the payload's environment and expectations kept), and a correction attempt is stored;
:func:`~librarian.correction.fixes.learn_from_workflow` (and the loop itself, at its next call for
the workflow) turns the ones that pass the evaluator into verified fixes. Nothing here names a tool,
an option or a command.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeGuard

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from librarian.app import Librarian
from librarian.config import Settings
from librarian.correction.answers import USER_COMMAND_CONFIDENCE, answer_command, answers_for
from librarian.correction.escalation import EscalationReport, FailedCommand
from librarian.correction.fixes import AttemptRecord, FixStore, learn_from_workflow
from librarian.correction.llm_corrector import LLMCorrector, LLMRequest
from librarian.correction.locate import locate_task
from librarian.correction.narration import candidates_summary, research_summary, trigger_summary
from librarian.correction.options import CorrectionOption, build_plan, from_candidate, rank_options
from librarian.correction.problem import problem_of, tool_of
from librarian.correction.research_step import (
    Researcher,
    broader_query,
    merged_snippets,
    primary_query,
    used_snippets,
)
from librarian.correction.reuse import knowledge_base_options, session_cache_options
from librarian.correction.state import LoopOptions, LoopRun, StepRecorder
from librarian.correction.strategies import ExplicitReplacement, SynopsisRewrite
from librarian.correction.timeline import record_step
from librarian.correction.triggers import (
    TriggerRule,
    classify_failure,
    default_trigger_rules,
    load_trigger_rules,
)
from librarian.correction.values import rejected_options
from librarian.correction.versions import VersionCache
from librarian.errors import LibrarianError
from librarian.llm import LLMClient
from librarian.runtime.correctors import (
    Clarification,
    ClarificationRequest,
    CorrectionContext,
    CorrectionProposal,
    Corrector,
    CreateMissingPathCorrector,
)
from librarian.runtime.policy import StrategyPolicy
from librarian.runtime.sandbox import EnvironmentManager
from librarian.storage.database import open_database

__all__ = ["LoopOptions", "SelfCorrectingCorrector", "loop_correctors"]

logger = logging.getLogger(__name__)

COMMAND_EXECUTOR = "command_executor"
DEFAULT_EXECUTOR_TYPES = ("command_executor", "code_executor", "file_writer", "api_caller")
_RESEARCH_STRATEGIES = (ExplicitReplacement(), SynopsisRewrite())
_STRATEGY_NAMES = ("learned_fix", "explicit_replacement", "synopsis_rewrite", "llm", "user_answer")


class SelfCorrectingCorrector:
    """The self-correcting loop as a runtime :class:`~librarian.runtime.correctors.Corrector`.

    Args:
        sessions: session factory of the runtime database (verified fixes, attempts, timeline).
        environment: the sandbox tasks run in (version probes, workspaces).
        librarian: the documentation store to research; ``None`` disables research.
        llm: a chat model for the LLM corrector; ``None`` uses the offline strategies only.
        rules: trigger rules (default: the shipped ones).
        options: thresholds and fallbacks.
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
        self.researcher = Researcher(librarian)
        self.llm = LLMCorrector(llm, known_executor_types=known_executor_types) if llm is not None else None
        self.rules = list(rules) if rules is not None else default_trigger_rules()
        self.options = options or LoopOptions()
        self.escalations = escalations
        self.versions = versions or VersionCache(environment)
        self.policy = policy or StrategyPolicy()
        self.fixes = FixStore(
            sessions,
            workspaces=environment.root,
            feedback_sessions=feedback_sessions,
            policy=self.policy,
            actor=self.name,
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
        ``correction_trigger_files`` settings names; the threshold and whether to ask the user come
        from ``correction_confidence_threshold`` and ``correction_ask_user`` unless ``options`` is given.
        """
        if rules is None and settings.correction_trigger_files:
            rules = load_trigger_rules(settings.correction_trigger_files)
        if options is None:
            options = LoopOptions(
                threshold=settings.correction_confidence_threshold, ask_user=settings.correction_ask_user
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
        )

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
        run.trigger = classify_failure(run.argv, run.exit_code or 0, run.stderr, run.stdout, rules=self.rules)
        step("trigger", trigger_summary(run.trigger), run.trigger.to_dict())
        if run.trigger.category == "transient" and self.options.retry_transient:
            return self._retry_unchanged(run, step)
        if run.origin is not None:
            # Our own correction failed: its command is not the way. The original command says
            # what was meant; correct that again, without the commands already tried.
            self._back_to_origin(run, step)
        if not run.trigger.correctable:
            return None
        _, program_length = tool_of(run.argv)
        program = tuple(run.argv[:program_length])
        workspace = run.workspace or self.environment.workspace_for("librarian-probe")
        run.version, cached = self.versions.detect(program, workspace)
        version = run.version.version if run.version else None
        step(
            "version",
            f"{shlex.join(program)} is version {version}" + (" (remembered)" if cached else "")
            if version
            else f"no version could be read from {shlex.join(program)}",
            {"version": version, "raw": run.version.raw if run.version else "", "cached": cached},
        )
        run.problem = problem_of(run.argv, run.output, version)
        for option_source in (session_cache_options, knowledge_base_options):
            chosen = self._choose(run, option_source(self.fixes, run, self.options, step))
            if chosen is not None:
                return self._apply(run, chosen, step)
        answers = answers_for(run.context, self.name)
        if answers:
            # The user answered our question: what they said leads; the research already done
            # the first time is not repeated.
            chosen = self._use_answers(run, step, version, answers)
        else:
            chosen = self._research_and_choose(run, step, version, broad=False)
            if chosen is None and self.options.broaden:
                chosen = self._research_and_choose(run, step, "latest", broad=True)
            if chosen is None and self.options.ask_user:
                return self._ask(run, step)
        if chosen is not None:
            return self._apply(run, chosen, step)
        self._escalate(run, step)
        return None

    # -- steps ------------------------------------------------------------------------------------

    def _start(self, context: CorrectionContext) -> LoopRun | None:
        failed = context.failed
        argv = failed.payload.get("argv")
        if failed.executor_type != COMMAND_EXECUTOR or not _is_argv(argv):
            return None
        notes = failed.feedback_notes or {}
        details = notes.get("details") if isinstance(notes.get("details"), dict) else {}
        assert isinstance(details, dict)
        exit_code = details.get("exit_code")
        stderr = str(details.get("stderr") or "")
        stdout = str(details.get("stdout") or "")
        if not stderr and not stdout:
            stderr = str(notes.get("error_message") or "")
        location = locate_task(self.sessions, context)
        run = LoopRun(
            context=context,
            argv=list(argv),
            exit_code=exit_code if isinstance(exit_code, int) else None,
            stderr=stderr,
            stdout=stdout,
            location=location,
        )
        if location is not None:
            run.workspace = self.environment.workspace_for(str(location.workflow_id))
            # What earlier corrections of this workflow led to is decided by now: learn it first.
            self.fixes.settle(location.workflow_id)
            attempts = self.fixes.attempts(location.workflow_id, location.task_id)
            run.tried = [list(attempt.corrected_argv) for attempt in attempts]
            # Every command this task ran and failed with: originals, then failed corrections.
            for attempt in attempts:
                if all(f.argv != list(attempt.failed_argv) for f in run.history):
                    run.history.append(
                        FailedCommand(list(attempt.failed_argv), attempt.exit_code, attempt.error_text)
                    )
            if attempts and list(attempts[-1].corrected_argv) == run.argv:
                run.origin = attempts[0]
        run.history.append(FailedCommand(run.argv, run.exit_code, run.stderr, run.stdout))
        return run

    def _back_to_origin(self, run: LoopRun, step: StepRecorder) -> None:
        origin = run.origin
        assert origin is not None
        failed = run.argv
        run.argv = list(origin.failed_argv)
        run.stderr, run.stdout, run.exit_code = origin.error_text, "", origin.exit_code
        run.trigger = classify_failure(run.argv, run.exit_code or 1, run.stderr, rules=self.rules)
        step(
            "correction_failed",
            f"the correction `{shlex.join(failed)}` failed too; correcting the original command "
            f"`{shlex.join(run.argv)}` again, without the {len(run.tried)} command(s) already tried",
            {
                "failed_argv": failed,
                "original_argv": run.argv,
                "tried": run.tried,
                "trigger": run.trigger.to_dict(),
            },
        )

    def _research_and_choose(
        self, run: LoopRun, step: StepRecorder, version: str | None, *, broad: bool
    ) -> CorrectionOption | None:
        assert run.problem is not None
        context = run.context
        if broad:
            rejected = [r.option for r in rejected_options(run.output, run.argv)]
            query = broader_query(context.goal, run.argv, run.problem.tool, rejected)
        else:
            query = primary_query(context.failed.description, context.goal, context.failed.key)
        attempt = self.researcher.research(run.problem.tool, query, version, run.output.strip())
        run.research.append(attempt)
        step("research", research_summary(attempt, broad), {**attempt.to_dict(), "broad": broad})
        snippets = merged_snippets(run.research)
        failure = run.failure_input(snippets=snippets)
        options = [
            from_candidate(candidate, "research")
            for strategy in _RESEARCH_STRATEGIES
            for candidate in strategy.propose(failure)
        ]
        options += self._llm_options(run, snippets, step)
        chosen = self._choose(run, options)
        step(
            "candidates",
            candidates_summary(options, chosen, self.options.threshold),
            {
                "options": [o.to_dict() for o in rank_options(options)][:10],
                "threshold": self.options.threshold,
            },
        )
        return chosen

    def _use_answers(
        self, run: LoopRun, step: StepRecorder, version: str | None, answers: list[Clarification]
    ) -> CorrectionOption | None:
        """Options from the user's answers: a command line they gave, or what their words lead to."""
        assert run.problem is not None
        options: list[CorrectionOption] = []
        for item in answers:
            argv = answer_command(item.answer, run.problem.program, run.problem.tool)
            if argv is not None:
                options.append(
                    CorrectionOption(
                        argv=argv,
                        strategy="user_answer",
                        source="user",
                        confidence=USER_COMMAND_CONFIDENCE,
                        rationale=f"the user answered {item.question!r} with this command",
                        evidence={"question": item.question, "answer": item.answer},
                    )
                )
        said = "\n".join(item.answer for item in answers)
        attempt = self.researcher.research(
            run.problem.tool, f"{said} {run.context.goal}".strip(), version, run.output.strip()
        )
        run.research.append(attempt)
        step("research", research_summary(attempt, False) + " (with the user's answer)", attempt.to_dict())
        snippets = merged_snippets(run.research)
        # Phrasings such as "use X instead" are read in the answer as they are in an error message.
        failure = replace(run.failure_input(snippets=snippets), stderr=f"{run.stderr}\n{said}")
        for strategy in _RESEARCH_STRATEGIES:
            for candidate in strategy.propose(failure):
                options.append(
                    replace(
                        from_candidate(candidate, "user"), evidence={**candidate.evidence, "answer": said}
                    )
                )
        options += self._llm_options(run, snippets, step)
        chosen = self._choose(run, options)
        step(
            "candidates",
            candidates_summary(options, chosen, self.options.threshold),
            {
                "options": [o.to_dict() for o in rank_options(options)][:10],
                "threshold": self.options.threshold,
            },
        )
        return chosen

    def _ask(self, run: LoopRun, step: StepRecorder) -> ClarificationRequest:
        """Pause the workflow with a question only the user can answer."""
        best = rank_options(run.considered)[:1]
        question = (
            f"`{shlex.join(run.argv)}` failed with: {run.trigger.matched_text if run.trigger else ''} -- "
            + (
                f"the best correction found, `{shlex.join(best[0].argv)}` ({best[0].strategy}), has "
                f"confidence {best[0].confidence:.2f}, below {self.options.threshold:.2f}. "
                if best
                else "no correction was found in the documentation. "
            )
            + "Which command should run instead? Answer with the full command line, or say what to use "
            "(for example 'use NEW instead of OLD')."
        )
        step("clarification", question, {"question": question, "candidates": [o.to_dict() for o in best]})
        return ClarificationRequest(
            strategy=self.name, question=question, rationale="no confident correction"
        )

    def _llm_options(
        self, run: LoopRun, snippets: list[dict[str, Any]], step: StepRecorder
    ) -> list[CorrectionOption]:
        if self.llm is None:
            return []
        failed = run.context.failed
        request = LLMRequest(
            goal=run.context.goal,
            task_key=failed.key,
            description=failed.description,
            executor_type=failed.executor_type,
            payload=dict(failed.payload),
            exit_code=run.exit_code,
            stderr=run.stderr,
            stdout=run.stdout,
            version=run.version.version if run.version else None,
            snippets=snippets,
            tried=run.tried,
            answers=[item.answer for item in answers_for(run.context, self.name)],
        )
        try:
            proposal = self.llm.propose(request)
        except LibrarianError as exc:
            step("llm", f"the LLM gave no usable plan: {exc.message}", {"error": exc.message})
            return []
        step(
            "llm",
            f"the LLM proposed a plan (confidence {proposal.confidence:.2f}, {proposal.attempts} answer(s))",
            {"plan": proposal.plan, "problems": proposal.problems, "attempts": proposal.attempts},
        )
        if proposal.retry_argv is None:
            return []
        *preparation, _ = proposal.plan["steps"]
        return [
            CorrectionOption(
                argv=proposal.retry_argv,
                strategy="llm",
                source="llm",
                confidence=round(min(proposal.confidence, self.options.llm_max_confidence), 4),
                rationale=proposal.rationale,
                evidence={"model": self.llm.llm.model_name, "self_rated_confidence": proposal.confidence},
                steps=list(preparation),
                retry_payload=dict(proposal.validated.retry_payload),
            )
        ]

    def _choose(self, run: LoopRun, options: list[CorrectionOption]) -> CorrectionOption | None:
        run.considered.extend(options)
        exclude = [run.argv, *run.tried, *(f.argv for f in run.history)]
        ranked = rank_options(options, preference=self._preference(run), exclude=exclude)
        qualified = [o for o in ranked if o.confidence >= self.options.threshold]
        return qualified[0] if qualified else None

    def _preference(self, run: LoopRun) -> list[str]:
        category = run.trigger.category if run.trigger else "unknown"
        with self.sessions() as session:
            return self.policy.choose(session, category, list(_STRATEGY_NAMES))

    def _apply(self, run: LoopRun, option: CorrectionOption, step: StepRecorder) -> CorrectionProposal:
        failed = run.context.failed
        assert run.problem is not None and run.trigger is not None
        plan = build_plan(
            option, task_key=failed.key, executor_type=failed.executor_type, payload=failed.payload
        )
        research_calls = len(run.research)
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
                    corrected_argv=option.argv,
                    strategy=option.strategy,
                    source=option.source,
                    confidence=option.confidence,
                    rationale=option.rationale,
                    fix_id=option.fix_id,
                    snippets=used_snippets(option.evidence.get("entity_name"), run.research),
                    research_calls=research_calls,
                    failed_at=run.location.failed_at,
                )
            )
        seconds = time.perf_counter() - run.started
        step(
            "correction",
            f"{option.strategy} ({option.source}, confidence {option.confidence:.2f}): "
            f"`{shlex.join(option.argv)}` -- {option.rationale}",
            {
                **option.to_dict(),
                "failed_argv": run.argv,
                "research_calls": research_calls,
                "loop_seconds": round(seconds, 4),
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
        )
        step("correction", "transient failure: retry the command unchanged", option.to_dict())
        plan = build_plan(
            option, task_key=failed.key, executor_type=failed.executor_type, payload=failed.payload
        )
        return CorrectionProposal(strategy=self.name, plan=plan, rationale=option.rationale)

    def _escalate(self, run: LoopRun, step: StepRecorder) -> None:
        failed = run.context.failed
        threshold = self.options.threshold
        ranked = rank_options(run.considered)
        tried = {tuple(argv) for argv in [run.argv, *run.tried, *(f.argv for f in run.history)]}
        candidates = [
            {
                **option.to_dict(),
                "rejected_because": "already tried for this task"
                if tuple(option.argv) in tried
                else f"confidence {option.confidence:.2f} is below {threshold:.2f}",
            }
            for option in ranked[:10]
        ]
        history = list(run.history)
        if run.trigger is not None and run.origin is None:
            last = history[-1]
            history[-1] = FailedCommand(
                last.argv, last.exit_code, last.stderr, last.stdout, run.trigger.to_dict()
            )
        suggestions = list(dict.fromkeys(s for attempt in run.research for s in attempt.suggestions))
        report = EscalationReport(
            goal=run.context.goal,
            task_key=failed.key,
            reason=(
                f"no correction reached confidence {threshold:.2f} after {len(run.research)} research "
                f"attempt(s) and {len(ranked)} candidate(s)"
            ),
            workflow_id=str(run.location.workflow_id) if run.location else None,
            tool=run.problem.tool if run.problem else None,
            version=run.version.version if run.version else None,
            version_output=run.version.raw if run.version else "",
            failures=history,
            research=[attempt.to_dict() for attempt in run.research],
            candidates=candidates,
            threshold=threshold,
            clarification=[
                {"question": item.question, "answer": item.answer}
                for item in answers_for(run.context, self.name)
            ],
            next_steps=suggestions
            or ["check the tool's own help for the failed command", "index the tool's documentation"],
        )
        paths: list[str] = []
        if self.escalations is not None:
            markdown, document = report.write(self.escalations)
            paths = [str(markdown), str(document)]
        step(
            "escalation",
            report.reason + (f"; report: {paths[0]}" if paths else ""),
            {"report": report.to_dict(), "paths": paths},
        )
        return None

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


def _is_argv(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and bool(value) and all(isinstance(item, str) for item in value)


def loop_correctors(settings: Settings | None = None) -> list[Corrector]:
    """The runtime's correction strategies with the loop first, researching the store ``settings`` name.

    For ``librarian worker --correctors librarian.correction.loop:loop_correctors`` (``settings``
    default to :meth:`Settings.load`) and for ``Runtime(settings, correctors=loop_correctors(settings))``.
    The loop retries transient failures itself, so the plain retry strategy is not included (the
    policy would try it on API drift too); the missing-path strategy is.
    """
    settings = settings or Settings.load()
    library = Librarian(settings)
    # The store and the runtime share settings.resolved_database_url: one connection pool serves both.
    corrector = SelfCorrectingCorrector.from_settings(settings, librarian=library, sessions=library.sessions)
    corrector._owned_librarian = library
    # Workers have no caller waiting to settle: verified fixes are learned when workflows finish.
    corrector.settle_on_finish = True
    return [corrector, CreateMissingPathCorrector()]
