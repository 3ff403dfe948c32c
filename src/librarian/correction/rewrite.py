"""Strategy (c): rewrite the failed command into a documented command that accepts what was rejected.

When a command rejects an option, another command of the same tool often accepts it (the option
moved, or the command was the wrong one for it). Among the researched commands, this strategy takes
each one that documents the rejected option(s), reads its synopsis (options outside ``[...]`` are
required), and builds ``[program, *its subcommand path, ...]``:

1. the rejected options are carried over verbatim with their values, and so is every other option of
   the failed command that the new command accepts;
2. each required option is filled with a value of the failed command matched by meaning
   (:mod:`~librarian.correction.matching`: a URL's host to an option described as a bucket or host,
   a base name to a key or name, an existing file to a body, data or file option);
3. a value no required option took is not dropped silently: an existing file (its content) or any other
   value goes to the optional option that matches it *strongly* (its head noun or value hint agrees,
   e.g. an optional ``--body`` described as "object data" of type ``blob`` takes a local file), or,
   when the synopsis has positional arguments, stays positional; otherwise the candidate says which
   value it could not place and loses confidence;
4. required positionals are filled the same way, by the placeholder's name.

Confidence starts at 0.85 and drops for every required option filled only weakly (x0.7) or not at all
(x0.25), every value left unplaced (x0.75; x0.5 for an existing local file, the data the user meant
to send), every option of the failed command dropped (x0.85), a
rejected option the new command does not accept (x0.5), and a carried value whose shape does not fit
the option (a flat ``k=v`` for an option documented as a structure: x0.5).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from librarian.correction.candidates import Candidate, FailureInput
from librarian.correction.helpdocs import CommandDoc, OptionDoc, SynopsisForm, documented_paths
from librarian.correction.matching import (
    PRIMARY_FACET,
    STRONG,
    WEAK,
    Facet,
    facets,
    flat,
    score,
    structured_hint,
)
from librarian.correction.values import (
    CommandValue,
    ParsedCommand,
    RejectedOption,
    parse_command,
    rejected_options,
)

__all__ = ["SynopsisRewrite"]

_BASE = 0.85
_WEAK_FILL = 0.7
_UNFILLED = 0.25
_UNPLACED = 0.75
_UNPLACED_FILE = 0.5  # an existing local file is the data the user meant to send: losing it is worse
_DROPPED_OPTION = 0.85
_NOT_ACCEPTED = 0.5
_SHAPE_MISMATCH = 0.5
_FORM_WITHOUT_OPTION = 0.8


@dataclass
class _Plan:
    """One way of rewriting onto one usage form of one documented command."""

    doc: CommandDoc
    form: SynopsisForm
    confidence: float = _BASE
    required: list[list[str]] = field(default_factory=list)  # filled required options, form order
    placed: list[list[str]] = field(default_factory=list)  # values put into optional options
    carried: list[list[str]] = field(default_factory=list)  # options carried over, original order
    positionals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def argv(self, program: Sequence[str]) -> list[str]:
        tokens = [*program, *self.doc.path]
        for group in (*self.required, *self.placed, *self.carried):
            tokens.extend(group)
        return [*tokens, *self.positionals]


class SynopsisRewrite:
    """Rewrite onto the researched command that accepts the rejected options (see the module docs)."""

    name = "synopsis_rewrite"

    def __init__(self, max_candidates: int = 5) -> None:
        self.max_candidates = max_candidates

    def propose(self, failure: FailureInput) -> list[Candidate]:
        """One candidate per researched command that accepts a rejected option, best first."""
        docs = failure.command_docs()
        if not docs:
            return []
        tool = _tool_of(failure.argv, docs)
        docs = [d for d in docs if d.tool == tool] or docs
        paths = documented_paths(docs)
        parsed = parse_command(failure.argv, failure.workspace, tool=tool or None, known_paths=paths)
        own = next((d for d in docs if d.path == parsed.command_path), None)
        if own is not None:
            parsed = parse_command(
                failure.argv,
                failure.workspace,
                tool=tool or None,
                known_paths=paths,
                takes_value=own.takes_value,
            )
        rejected = rejected_options(failure.output, failure.argv)
        if not rejected:
            return []
        plans: list[tuple[_Plan, float]] = []
        for doc in docs:
            # A command qualifies by accepting a rejected option as its own: an option that every
            # command accepts was not rejected for being given to the wrong command.
            if (
                not doc.path
                or doc.path == parsed.command_path
                or not any(doc.accepts_own(r.option) for r in rejected)
            ):
                continue
            forms = doc.forms or (SynopsisForm(""),)
            best = max(
                (_plan(parsed, doc, form, rejected, len(forms) > 1) for form in forms),
                key=lambda p: p.confidence,
            )
            plans.append((best, float(doc.snippet.get("score") or 0.0)))
        plans.sort(key=lambda item: (-item[0].confidence, -item[1]))
        return [self._candidate(plan, parsed) for plan, _ in plans[: self.max_candidates]]

    def _candidate(self, plan: _Plan, parsed: ParsedCommand) -> Candidate:
        failed_name = (
            " ".join([os.path.basename(parsed.program[-1]), *parsed.command_path]) if parsed.program else ""
        )
        summary = f"`{plan.doc.name}` documents {', '.join(plan.notes[:1])}; `{failed_name}` rejected it."
        details = " ".join(plan.notes[1:] + plan.problems)
        return Candidate(
            argv=plan.argv(parsed.program),
            strategy=self.name,
            confidence=round(min(plan.confidence, 0.9), 4),
            rationale=f"{summary} {details}".strip(),
            evidence={
                "entity_name": plan.doc.snippet.get("entity_name"),
                "source_url": plan.doc.snippet.get("source_url"),
                "synopsis_form": plan.form.text[:500],
                "problems": list(plan.problems),
            },
        )


def _tool_of(argv: Sequence[str], docs: Sequence[CommandDoc]) -> str:
    names = {os.path.basename(token) for token in argv[:4]}
    return next((d.tool for d in docs if d.tool and d.tool in names), docs[0].tool)


def _plan(
    parsed: ParsedCommand, doc: CommandDoc, form: SynopsisForm, rejected: list[RejectedOption], several: bool
) -> _Plan:
    plan = _Plan(doc, form)
    used_indices: set[int] = set()
    carried_names: set[str] = set()
    accepted = [r for r in rejected if doc.accepts(r.option)]
    plan.notes.append(", ".join(f"`{r.option}`" for r in accepted))
    for item in rejected:
        if item not in accepted:
            plan.confidence *= _NOT_ACCEPTED
            plan.problems.append(f"It does not accept `{item.option}`, which is dropped.")
            used_indices.add(item.index)
            continue
        tokens, indices = _rejected_tokens(item, parsed, doc)
        used_indices.update(indices)
        carried_names.add(item.option)
        plan.carried.append(tokens)
        option_doc = doc.options.get(item.option)
        if structured_hint(option_doc) and flat(tokens[1:]):
            plan.confidence *= _SHAPE_MISMATCH
            hint = option_doc.value_hint if option_doc else ""
            plan.problems.append(f"`{item.option}` expects a {hint}, but `{' '.join(tokens[1:])}` is flat.")
        if several and item.option not in form.mentioned:
            plan.confidence *= _FORM_WITHOUT_OPTION
    _carry_other_options(plan, parsed, doc, rejected, used_indices, carried_names)
    pool = [v for v in parsed.values if v.index not in used_indices]
    used_facets: set[tuple[int, str]] = set()
    _fill_required(plan, form, pool, carried_names, used_facets)
    _fill_positionals(plan, form, pool, used_facets)
    _place_leftovers(plan, form, pool, used_facets, carried_names)
    return plan


def _rejected_tokens(
    item: RejectedOption, parsed: ParsedCommand, doc: CommandDoc
) -> tuple[list[str], set[int]]:
    """The rejected option's tokens as written, with its values (listed by the error, or per the docs)."""
    argv = parsed.argv
    tokens, indices = [argv[item.index]], {item.index}
    if "=" in argv[item.index]:
        return tokens, indices
    count = len(item.values) if item.values_known else (1 if doc.takes_value(item.option) else 0)
    for position in range(item.index + 1, min(item.index + 1 + count, len(argv))):
        tokens.append(argv[position])
        indices.add(position)
    return tokens, indices


def _carry_other_options(
    plan: _Plan,
    parsed: ParsedCommand,
    doc: CommandDoc,
    rejected: list[RejectedOption],
    used_indices: set[int],
    carried_names: set[str],
) -> None:
    rejected_at = {r.index for r in rejected}
    for use in parsed.options:
        if use.index in rejected_at:
            continue
        if doc.accepts(use.name):
            plan.carried.append(
                [parsed.argv[use.index], *(parsed.argv[i] for i in use.value_indices if i != use.index)]
            )
            used_indices.add(use.index)
            used_indices.update(use.value_indices)
            carried_names.add(use.name)
        else:
            # Its value stays in the pool (remembering the option's words); the option itself is lost.
            plan.confidence *= _DROPPED_OPTION
            plan.problems.append(f"`{doc.name}` has no `{use.name}`, so it is dropped.")
            used_indices.add(use.index)


def _satisfied(group: frozenset[str], doc: CommandDoc, carried: set[str]) -> bool:
    spellings = set(group)
    for name in group:
        option = doc.options.get(name)
        if option is not None:
            spellings.update(option.spellings)
    return bool(spellings & carried)


def _option_for(group: frozenset[str], doc: CommandDoc) -> OptionDoc:
    # The long spelling reads better and usually has the descriptive words.
    name = sorted(group, key=lambda n: (not n.startswith("--"), n))[0]
    return doc.options.get(name) or next((doc.options[n] for n in group if n in doc.options), OptionDoc(name))


def _fill_required(
    plan: _Plan,
    form: SynopsisForm,
    pool: list[CommandValue],
    carried: set[str],
    used_facets: set[tuple[int, str]],
) -> None:
    groups = [g for g in form.required if not _satisfied(g, plan.doc, carried)]
    options = [_option_for(g, plan.doc) for g in groups]
    offers = [facet for value in pool for facet in facets(value)]
    scored = sorted(
        (
            (match.points, position, facet, match.agreed)
            for position, option in enumerate(options)
            if plan.doc.takes_value(option.name) is not False
            for facet in offers
            for match in (score(facet, option),)
            if match.points >= WEAK
        ),
        key=lambda item: (-item[0], item[1], item[2].value.index),
    )
    chosen: dict[int, tuple[float, Facet, tuple[str, ...]]] = {}
    for points, position, facet, agreed in scored:
        key = (facet.value.index, facet.name)
        if position in chosen or key in used_facets:
            continue
        chosen[position] = (points, facet, agreed)
        used_facets.add(key)
    for position, option in enumerate(options):
        if position not in chosen:
            plan.confidence *= _UNFILLED
            reason = (
                "it is a flag that selects another usage"
                if plan.doc.takes_value(option.name) is False
                else ("no value of the failed command matches it")
            )
            plan.problems.append(f"Required `{option.name}` could not be filled: {reason}.")
            continue
        points, facet, agreed = chosen[position]
        plan.required.append([option.name, facet.text])
        strength = "strongly" if points >= STRONG else "weakly"
        if points < STRONG:
            plan.confidence *= _WEAK_FILL
        plan.notes.append(
            f"Required `{option.name}` takes {_describe(facet)} ({strength}: {', '.join(agreed)})."
        )


def _fill_positionals(
    plan: _Plan, form: SynopsisForm, pool: list[CommandValue], used_facets: set[tuple[int, str]]
) -> None:
    for placeholder in form.positionals:
        if not placeholder.required:
            continue
        offers = [f for v in pool for f in facets(v) if (v.index, f.name) not in used_facets]
        ranked = sorted(((score(f, placeholder.name), f) for f in offers), key=lambda item: -item[0].points)
        if ranked and ranked[0][0].points >= WEAK:
            match, facet = ranked[0]
        else:
            # Nothing matches by name: the next positional value, as written, keeps its role.
            spare = [f for f in offers if f.value.option is None and f.name == PRIMARY_FACET[f.value.kind]]
            if not spare:
                plan.confidence *= _UNFILLED
                plan.problems.append(f"Required argument <{placeholder.name}> could not be filled.")
                continue
            facet, match = spare[0], None
            plan.confidence *= _WEAK_FILL
        used_facets.add((facet.value.index, facet.name))
        plan.positionals.append(facet.text)
        how = f"matched {', '.join(match.agreed)}" if match else "the next positional value"
        plan.notes.append(f"Argument <{placeholder.name}> takes {_describe(facet)} ({how}).")


def _place_leftovers(
    plan: _Plan,
    form: SynopsisForm,
    pool: list[CommandValue],
    used_facets: set[tuple[int, str]],
    carried: set[str],
) -> None:
    filled = {group[0] for group in plan.required} | carried
    optional = [
        o
        for o in dict.fromkeys(plan.doc.options.values())
        if not set(o.spellings) & filled and plan.doc.takes_value(o.name) is not False
    ]
    takes_more_positionals = any(not p.required or p.repeatable for p in form.positionals)
    for value in pool:
        primary = PRIMARY_FACET[value.kind]
        if (value.index, primary) in used_facets or (
            value.kind == "url" and _any_facet_used(value, used_facets)
        ):
            continue
        facet = (
            next(f for f in facets(value) if f.name == primary) if primary != "host" else facets(value)[-1]
        )
        ranked = sorted(((score(facet, o), o) for o in optional), key=lambda item: -item[0].points)
        if ranked and ranked[0][0].points >= STRONG:
            match, option = ranked[0]
            optional.remove(option)
            plan.placed.append([option.name, facet.text])
            used_facets.add((value.index, facet.name))
            agreed = ", ".join(match.agreed)
            plan.notes.append(f"{_describe(facet).capitalize()} goes to optional `{option.name}` ({agreed}).")
        elif takes_more_positionals and value.option is None:
            plan.positionals.append(value.text)
            used_facets.add((value.index, primary))
        else:
            plan.confidence *= _UNPLACED_FILE if value.kind == "file" and value.exists else _UNPLACED
            plan.problems.append(f"{_describe(facet).capitalize()} has no place in `{plan.doc.name}`.")


def _any_facet_used(value: CommandValue, used: set[tuple[int, str]]) -> bool:
    return any(index == value.index for index, _ in used)


def _describe(facet: Facet) -> str:
    value = facet.value
    if facet.name == "content":
        return f"the {'existing local ' if value.exists else ''}file {value.text}"
    if facet.name == "whole":
        return f"`{value.text}`"
    return f"the {facet.name} of {value.text} (`{facet.text}`)"
