"""The loop's steps that produce and choose correction options: research, candidates, the LLM, answers.

:class:`OptionSteps` is a part of :class:`~librarian.correction.loop.SelfCorrectingCorrector` (which
inherits it): from the research of a failure (or the user's answers, or fixes learned earlier) it
builds the candidate options of every strategy, the LLM's when one is configured, and chooses the best
at or above the confidence threshold, in the order the strategy policy prefers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from librarian.correction import code_flow
from librarian.correction.answers import USER_COMMAND_CONFIDENCE, answer_command, answers_for
from librarian.correction.command_flow import offline_candidates
from librarian.correction.llm_corrector import LLMCorrector, LLMRequest
from librarian.correction.narration import candidates_summary, research_summary
from librarian.correction.options import CorrectionOption, from_candidate, rank_options
from librarian.correction.research_step import (
    Researcher,
    broader_query,
    merged_snippets,
    primary_query,
)
from librarian.correction.state import LoopOptions, LoopRun, StepRecorder
from librarian.correction.strategies import LearnedFix
from librarian.correction.values import rejected_options
from librarian.errors import LibrarianError
from librarian.runtime.policy import StrategyPolicy
from librarian.runtime.sandbox import EnvironmentManager

# The strategies the policy orders, for near ties between options.
_STRATEGY_NAMES = (
    "learned_fix",
    "chain",
    "explicit_replacement",
    "synopsis_rewrite",
    "command_edit",
    "code_edit",
    "llm",
    "user_answer",
)


class OptionSteps:
    """Producing and choosing options; the corrector provides the attributes below."""

    name: str
    researcher: Researcher
    environment: EnvironmentManager
    options: LoopOptions
    llm: LLMCorrector | None
    sessions: sessionmaker[Session]
    policy: StrategyPolicy

    def _research_and_choose(
        self, run: LoopRun, step: StepRecorder, version: str | None, *, broad: bool
    ) -> CorrectionOption | None:
        context = run.context
        sdk = run.docs_sdk or run.tool
        if broad:
            rejected = (
                [r.option for r in rejected_options(run.output, run.argv)] if run.kind == "command" else []
            )
            query = (
                broader_query(context.goal, run.argv, run.tool, rejected)
                if run.kind == "command"
                else code_flow.broader_query(run)
            )
        else:
            query = primary_query(context.failed.description, context.goal, context.failed.key)
            if run.kind == "code":
                query = code_flow.research_query(run, query)
        attempt = self.researcher.research(sdk, query, version, run.output.strip())
        run.research.append(attempt)
        step("research", research_summary(attempt, broad), {**attempt.to_dict(), "broad": broad})
        return self._candidates_and_choose(run, step)

    def _candidates_and_choose(
        self, run: LoopRun, step: StepRecorder, *, extra: str = ""
    ) -> CorrectionOption | None:
        snippets = merged_snippets(run.research)
        if run.kind == "code":
            options = code_flow.candidates(run, snippets, self.environment)
        else:
            failure = run.failure_input(snippets=snippets)
            if extra:
                # Phrasings such as "use X instead" are read in the user's answer as in an error message.
                failure = replace(failure, stderr=f"{failure.stderr}\n{extra}")
            options = [
                from_candidate(candidate, "research" if not extra else "user")
                for candidate in offline_candidates(failure)
            ]
        options += self._llm_options(run, snippets, options, step)
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

    def _use_answers(self, run: LoopRun, step: StepRecorder, answers: list[Any]) -> CorrectionOption | None:
        """Options from the user's answers: a command line they gave, or what their words lead to."""
        options: list[CorrectionOption] = []
        if run.kind == "command":
            for item in answers:
                argv = answer_command(item.answer, run.program, run.tool)
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
        version = run.version.version if run.version else None
        attempt = self.researcher.research(
            run.docs_sdk or run.tool, f"{said} {run.context.goal}".strip(), version, run.output.strip()
        )
        run.research.append(attempt)
        step("research", research_summary(attempt, False) + " (with the user's answer)", attempt.to_dict())
        chosen = self._choose(run, options)
        if chosen is not None:
            return chosen
        return self._candidates_and_choose(run, step, extra=said)

    def _llm_options(
        self,
        run: LoopRun,
        snippets: list[dict[str, Any]],
        offline: list[CorrectionOption],
        step: StepRecorder,
    ) -> list[CorrectionOption]:
        if self.llm is None:
            return []
        failed = run.context.failed
        payload = dict(failed.payload)
        payload["argv" if run.kind == "command" else "code"] = run.subject
        request = LLMRequest(
            goal=run.context.goal,
            task_key=failed.key,
            description=failed.description,
            executor_type=failed.executor_type,
            payload=payload,
            exit_code=run.exit_code,
            stderr=run.stderr,
            stdout=run.stdout,
            version=run.version.version if run.version else None,
            snippets=snippets,
            tried=[t if isinstance(t, list) else [str(t)] for t in run.tried],
            answers=[item.answer for item in answers_for(run.context, self.name)],
            candidates=[o.to_dict() for o in rank_options(offline)[:5]],
            chain=[f.to_dict() for f in run.history],
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
        retry = dict(proposal.validated.retry_payload)
        if run.kind == "command" and proposal.retry_argv is None:
            return []
        if run.kind == "code" and not isinstance(retry.get("code"), str):
            return []
        *preparation, _ = proposal.plan["steps"]
        return [
            CorrectionOption(
                argv=proposal.retry_argv or [],
                strategy="llm",
                source="llm",
                confidence=round(min(proposal.confidence, self.options.llm_max_confidence), 4),
                rationale=proposal.rationale,
                evidence={"model": self.llm.llm.model_name, "self_rated_confidence": proposal.confidence},
                steps=list(preparation),
                retry_payload=retry,
                code=retry.get("code") if run.kind == "code" else None,
                edits=[{"op": "llm", "summary": "code rewritten by the LLM"}] if run.kind == "code" else [],
            )
        ]

    def _choose(self, run: LoopRun, options: list[CorrectionOption]) -> CorrectionOption | None:
        run.considered.extend(options)
        exclude = [run.subject, *run.tried]
        ranked = rank_options(options, preference=self._preference(run), exclude=exclude)
        if run.kind == "command" and run.blamed:
            blamed = set(run.blamed)
            original = {token.partition("=")[0] for token in run.argv}
            ranked = [o for o in ranked if not ({t.partition("=")[0] for t in o.argv} - original) & blamed]
        qualified = [o for o in ranked if o.confidence >= self.options.threshold]
        return qualified[0] if qualified else None

    def _preference(self, run: LoopRun) -> list[str]:
        category = run.trigger.category if run.trigger else "unknown"
        with self.sessions() as session:
            return self.policy.choose(session, category, list(_STRATEGY_NAMES))

    def _learned(self, run: LoopRun, entries: list[dict[str, Any]], source: str) -> list[CorrectionOption]:
        """Stored fixes applied to this failure: templates to a command, edits to code."""
        if run.kind == "code":
            return code_flow.learned_options(run, [e for e in entries if e.get("kind") == "code"], source)
        commands = [e for e in entries if e.get("kind", "command") == "command"]
        options = []
        for candidate in LearnedFix().propose(run.failure_input(learned=commands)):
            option = from_candidate(candidate, source)
            strategy = next((e.get("strategy") for e in commands if e.get("id") == option.fix_id), None)
            options.append(replace(option, strategy="chain") if strategy == "chain" else option)
        return options
