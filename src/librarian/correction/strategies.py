"""The three offline correction strategies, and one call that runs them all.

Each strategy has ``name`` and ``propose(failure: FailureInput) -> list[Candidate]``:

- :class:`LearnedFix` (``learned_fix``): apply a verified fix recorded by :func:`make_fix_template`
  to this failure's values (another file, another bucket);
- :class:`~librarian.correction.replacement.ExplicitReplacement` (``explicit_replacement``): follow a
  replacement the error or the docs name ("use X instead", "did you mean X?");
- :class:`~librarian.correction.rewrite.SynopsisRewrite` (``synopsis_rewrite``): rewrite onto the
  researched command that accepts the rejected options, filling its required options with the failed
  command's values by meaning.

None of them names a tool, an option or a command: they read error phrasing, synopsis grammar and
documentation vocabulary that tools share.

Example:
    >>> error = 'unknown command "lst" - maybe you meant "list"'
    >>> failure = FailureInput(argv=["tool", "lst"], exit_code=1, stderr=error)
    >>> [c.argv for c in propose_all(failure)]
    [['tool', 'list']]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from librarian.correction.candidates import Candidate, FailureInput, Strategy, rank_candidates
from librarian.correction.fix_templates import FixTemplate, apply_fix_template, make_fix_template
from librarian.correction.replacement import ExplicitReplacement
from librarian.correction.rewrite import SynopsisRewrite

__all__ = [
    "Candidate",
    "ExplicitReplacement",
    "FailureInput",
    "FixTemplate",
    "LearnedFix",
    "Strategy",
    "SynopsisRewrite",
    "apply_fix_template",
    "default_strategies",
    "learned_fix_confidence",
    "make_fix_template",
    "propose_all",
]

_SCALE = 0.95


def learned_fix_confidence(successes: int, failures: int) -> float:
    """Confidence in a stored fix from its record: ``0.95 * (s + 3) / (s + f + 4)``.

    The mean of a Beta(3, 1) prior updated with the counts: a fix is stored only once verified, so
    before further evidence it is trusted (0.71); one more success gives 0.76, ten give 0.88; a
    failure pulls it down (0 successes, 1 failure: 0.57; 0 and 3: 0.41).
    """
    s, f = max(successes, 0), max(failures, 0)
    return _SCALE * (s + 3) / (s + f + 4)


class LearnedFix:
    """Apply the stored fixes whose failed template fits this failure, substituting its values."""

    name = "learned_fix"

    def propose(self, failure: FailureInput) -> list[Candidate]:
        """One candidate per stored fix that fits, most trusted first."""
        candidates: list[Candidate] = []
        for fix in failure.learned_fixes:
            failed, fixed = _tokens(fix.get("failed_argv_template")), _tokens(fix.get("fixed_argv_template"))
            if not failed or not fixed:
                continue
            argv = apply_fix_template(failed, fixed, failure.argv, failure.workspace)
            if argv is None or argv == list(failure.argv):
                continue
            successes, failures = int(fix.get("successes") or 0), int(fix.get("failures") or 0)
            candidates.append(
                Candidate(
                    argv=argv,
                    strategy=self.name,
                    confidence=round(learned_fix_confidence(successes, failures), 4),
                    rationale=(
                        f"A verified fix for this problem ({successes} successes, {failures} failures) "
                        f"applied to this command's values."
                    ),
                    evidence=_fix_evidence(fix),
                )
            )
        return rank_candidates(candidates)


def default_strategies() -> list[Strategy]:
    """The offline strategies in order of preference: learned fix, explicit replacement, synopsis rewrite."""
    return [LearnedFix(), ExplicitReplacement(), SynopsisRewrite()]


def propose_all(failure: FailureInput, strategies: Sequence[Strategy] | None = None) -> list[Candidate]:
    """Every strategy's candidates, most confident first, one per distinct command line."""
    found: list[Candidate] = []
    for strategy in default_strategies() if strategies is None else strategies:
        found.extend(strategy.propose(failure))
    return rank_candidates(found)


def _tokens(value: Any) -> list[str] | None:
    """A stored template as a token list, or ``None`` when it is not a non-empty list of strings."""
    if isinstance(value, list) and value and all(isinstance(t, str) for t in value):
        return value
    return None


def _fix_evidence(fix: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("id", "signature", "failed_argv_template", "fixed_argv_template", "successes", "failures")
    return {key: fix[key] for key in keys if key in fix}
