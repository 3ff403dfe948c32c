"""The offline brain of the self-correcting loop: triggers, failure values and correction strategies.

Pure functions and plain data only (no runtime, no database), so the loop, the demo and the tests
use the same code:

- :mod:`~librarian.correction.triggers`: rule-based trigger conditions (``default_triggers.yaml``
  plus users' files) and :func:`classify_failure`;
- :mod:`~librarian.correction.values`: the values of a failed command (files, URLs, ``k=v`` pairs,
  numbers, words) and the options its error rejects;
- :mod:`~librarian.correction.helpdocs`: what a researched help snippet says (options, synopsis forms,
  required options);
- :mod:`~librarian.correction.strategies`: the three offline strategies (learned fix, explicit
  replacement, synopsis rewrite), each ``propose(failure) -> list[Candidate]``, and
  :func:`propose_all`; :mod:`~librarian.correction.fix_templates` records verified fixes.

Nothing here names a particular tool, option or command: every rule is about how command lines and
help texts are written in general.
"""

from librarian.correction.candidates import Candidate, FailureInput, Strategy, rank_candidates
from librarian.correction.fix_templates import FixTemplate, apply_fix_template, make_fix_template
from librarian.correction.replacement import ExplicitReplacement
from librarian.correction.rewrite import SynopsisRewrite
from librarian.correction.strategies import (
    LearnedFix,
    default_strategies,
    learned_fix_confidence,
    propose_all,
)
from librarian.correction.triggers import (
    FailureClass,
    TriggerRule,
    classify_failure,
    default_trigger_rules,
    load_trigger_rules,
)
from librarian.correction.values import normalize_error_text, parse_command, rejected_options

__all__ = [
    "Candidate",
    "ExplicitReplacement",
    "FailureClass",
    "FailureInput",
    "FixTemplate",
    "LearnedFix",
    "Strategy",
    "SynopsisRewrite",
    "TriggerRule",
    "apply_fix_template",
    "classify_failure",
    "default_strategies",
    "default_trigger_rules",
    "learned_fix_confidence",
    "load_trigger_rules",
    "make_fix_template",
    "normalize_error_text",
    "parse_command",
    "propose_all",
    "rank_candidates",
    "rejected_options",
]
