"""Strategy ``command_edit``: correct a command line by small edits the error and the docs support.

From the failed argv, what its output says (:mod:`~librarian.correction.error_hints`) and the tool's
documented commands at the detected version (:class:`~librarian.correction.command_tree.CommandTree`),
it generates single :class:`~librarian.correction.edits.Edit` s:

- **rename an option**: to the replacement the output names ("use --b instead", "did you mean"), to
  the documented option whose description says it replaces the rejected one, or to a documented
  option with a clearly related name (``--format`` -> ``--output-format``, ``--loglevel`` ->
  ``--log-level``);
- **turn a flag into an option with a value**: a documented option lists a value that says what the
  dropped flag said (``--experimental-string-processing`` -> ``--enable-unstable-feature
  string_processing``; ``--strict-math=on`` -> ``--math=strict``);
- **drop an option**: strongly when the output says it was ignored, has no effect or is the default
  now; weakly when the documentation of the command no longer has it;
- **insert, replace or set a subcommand**: the command line the output suggests ("Use `tool check
  <path>` instead"), a documented sibling of a word called an invalid choice, or, when the output
  says a subcommand is required, the documented subcommand that accepts every option of the command
  (preferring one documented as the default);
- **move a value** between an option and a positional argument, as the usage of the command wants;

and pairs of them that touch different tokens. The edits of words (subcommands, values) are in
:mod:`~librarian.correction.subcommand_edits`; the parsed failure they all read is a
:class:`~librarian.correction.command_scene.Scene`. Each candidate is then checked against the docs
(:func:`~librarian.correction.docs_check.check_against_docs`: every option and subcommand documented,
listed values respected, every value of the failed command kept) and ranked by that evidence.
Nothing here names a tool, an option or a command.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from librarian.correction.candidates import Candidate, FailureInput
from librarian.correction.choices import choices
from librarian.correction.command_scene import (
    INFORMATIONAL,
    Scene,
    build_scene,
    co_required,
    distinct_options,
    dropped_values,
    family_members,
    first_sentence,
    is_boolean,
    is_suggestion,
    replaced_in_docs,
    replacement_for,
    with_values,
)
from librarian.correction.docs_check import DocsCheck, check_against_docs
from librarian.correction.edits import Edit, apply_edits, compatible
from librarian.correction.helpdocs import CommandDoc, OptionDoc
from librarian.correction.matching import STRONG, WEAK, facets, score, singular
from librarian.correction.names import content_words, keeps_meaning, kept_words, name_similarity
from librarian.correction.subcommand_edits import (
    missing_subcommand_edits,
    option_to_subcommand,
    required_subcommand_edits,
    template_edits,
    word_edits,
)
from librarian.correction.values import (
    RejectedOption,
    is_option,
)

__all__ = ["CommandEdits", "keeps_meaning", "name_similarity"]

_CAP = 0.95
_PAIR_FACTOR = 0.92
_MAX_SINGLES_PAIRED = 12
_KEEPS_REJECTED_FACTOR = 0.7
_FALSE = frozenset(["off", "false", "no", "0", "n", "disabled"])


class CommandEdits:
    """Edits of the failed command line, ranked by documentary evidence (see the module docs).

    Args:
        max_candidates: how many candidates to return at most.
    """

    name = "command_edit"

    def __init__(self, max_candidates: int = 8) -> None:
        self.max_candidates = max_candidates

    def propose(self, failure: FailureInput) -> list[Candidate]:
        """Candidate corrections of ``failure``, best first."""
        scene = build_scene(failure)
        if scene is None:
            return []
        singles = list(_single_edits(scene))
        singles = _best_per_result(scene, singles)
        sets: list[tuple[Edit, ...]] = [(edit,) for edit in singles]
        ranked = sorted(singles, key=lambda e: -e.prior)[:_MAX_SINGLES_PAIRED]
        sets += [pair for pair in itertools.combinations(ranked, 2) if compatible(*pair)]
        blamed = set(failure.blamed)
        found: dict[tuple[str, ...], Candidate] = {}
        for edits in sets:
            candidate = _candidate(scene, edits, self.name)
            if candidate is None or blamed & _introduced(scene.argv, candidate.argv):
                continue
            key = tuple(candidate.argv)
            if key not in found or candidate.confidence > found[key].confidence:
                found[key] = candidate
        ranked_candidates = sorted(found.values(), key=lambda c: -c.confidence)
        return ranked_candidates[: self.max_candidates]


# -- the scene ---------------------------------------------------------------------------------------


# -- single edits ------------------------------------------------------------------------------------


def _single_edits(scene: Scene) -> Iterator[Edit]:
    for target in scene.hints.targets:
        yield from _option_edits(scene, target)
    for index, word in scene.hints.rejected_words:
        yield from word_edits(scene, index, word)
    yield from template_edits(scene)
    yield from required_subcommand_edits(scene)
    yield from _to_option_edits(scene)
    yield from _required_option_edits(scene)
    yield from missing_subcommand_edits(scene)
    yield from _unspecified_option_edits(scene)
    for target in scene.hints.targets:
        yield from option_to_subcommand(scene, target)


def _readings(scene: Scene, target: RejectedOption) -> list[tuple[int, tuple[str, ...]]]:
    """How far the rejected option reaches: ``(end, its values)`` for each plausible arity."""
    argv, start = scene.argv, target.index
    if "=" in argv[start]:
        return [(start + 1, (argv[start].partition("=")[2],))]
    if target.values_known:
        return [(start + 1 + len(target.values), tuple(target.values))]
    readings: list[tuple[int, tuple[str, ...]]] = [(start + 1, ())]
    following = argv[start + 1] if start + 1 < len(argv) else None
    if following is not None and not is_option(following) and following != "--":
        readings.append((start + 2, (following,)))
    return readings


def _option_edits(scene: Scene, target: RejectedOption) -> Iterator[Edit]:
    page = scene.page
    for end, values in _readings(scene, target):
        span = (target.index, end)
        yield from _named_renames(scene, target, span, values)
        if page is not None:
            yield from _documented_renames(scene, page, target, span, values)
            yield from _flag_to_value(scene, page, target, span, values)
            yield from _to_positional(scene, page, target, span, values)
        yield _drop(scene, target, span, values, page)


def _named_renames(
    scene: Scene, target: RejectedOption, span: tuple[int, int], values: tuple[str, ...]
) -> Iterator[Edit]:
    """Renames the output names: "use --b instead (of --a)", "--a was renamed to --b", "did you mean"."""
    hints = scene.hints
    for replacement in hints.replacements:
        if not replacement_for(scene, replacement, target):
            continue
        named = replacement.old is not None
        suggestion = replacement.suggestion or is_suggestion(replacement.text)
        # Of several alternatives, the one closest to the rejected option is the likeliest meaning.
        alternatives = sorted(
            family_members(scene, replacement.new, target.option),
            key=lambda n: -name_similarity(target.option, n.split()[0].partition("=")[0]),
        )
        for rank, new in enumerate(alternatives):
            words = new.split()
            if words and not is_option(words[0]) and re.fullmatch(r"[A-Za-z][\w-]*", words[0]):
                # "Option 'out' has been removed. Use 'outFile' instead": the tool names options bare.
                dashes = target.option[: len(target.option) - len(target.option.lstrip("-"))]
                words = [dashes + words[0], *words[1:]]
            if not words or not is_option(words[0]):
                continue
            similarity = name_similarity(target.option, words[0].partition("=")[0])
            if named:
                prior = 0.88
            elif suggestion:
                # A tool's "did you mean" is spelling distance, not meaning: trust it as far as the
                # names are related, and not at all when a meaning word differs.
                kept = keeps_meaning(target.option, words[0].partition("=")[0])
                prior = 0.5 + 0.38 * similarity if kept else 0.5
            else:
                prior = 0.8
            prior *= 1.0 if rank == 0 else 0.9
            tokens = with_values(words, values, scene.page)
            yield Edit(
                "rename_option",
                span[0],
                span[1],
                tokens,
                prior,
                f'the output says to use `{" ".join(words)}` for `{target.option}`: "{replacement.text}"',
                target.option,
                {"source": "error", "text": replacement.text},
                drops=dropped_values(values, tokens),
            )


def _documented_renames(
    scene: Scene, page: CommandDoc, target: RejectedOption, span: tuple[int, int], values: tuple[str, ...]
) -> Iterator[Edit]:
    """Documented options that replace the rejected one: named in their description, or related by name."""
    used = {use.name for use in scene.parsed.options}
    bare = target.option.lstrip("-")
    for option in distinct_options(page):
        if option.name in used or target.option in option.spellings:
            continue
        mentions = re.search(rf"(?<![\w-])(?:--?)?{re.escape(bare)}(?![\w-])", option.description or "")
        kept = [s for s in option.spellings if keeps_meaning(target.option, s)]
        similarity = max((name_similarity(target.option, spelling) for spelling in kept), default=0.0)
        if mentions and re.search(
            r"(?i)\b(?:replac|formerly|previously|renamed|instead|was\b|alias)", option.description
        ):
            prior, why = (
                0.85,
                f'its description names `{target.option}`: "{first_sentence(option.description)}"',
            )
        elif similarity >= 0.5:
            prior = 0.45 + 0.4 * similarity
            why = (
                f"it is the documented option closest to `{target.option}` (name similarity {similarity:.2f})"
            )
        elif _described_as(target.option, option):
            # ``--apply-unsafe`` -> ``--unsafe``: "Apply unsafe fixes": the name keeps some of the
            # meaning words, the description's first sentence says the rest.
            prior = 0.7
            why = (
                f"its name and description say what `{target.option}` said: "
                f'"{first_sentence(option.description)}"'
            )
        else:
            continue
        takes = page.takes_value(option.name)
        tokens = with_values([option.name], values if takes is not False else (), page)
        if takes is False and values and not is_boolean(values):
            continue  # the value would have nowhere to go
        companions = co_required(option, page, used=used)
        if companions:
            # "--unsafe: Apply unsafe fixes. Should be used with `--write` or `--fix`."
            tokens = (*companions, *tokens)
            why += f"; its description asks for `{' '.join(companions)}` with it"
        yield Edit(
            "rename_option",
            span[0],
            span[1],
            tokens,
            prior,
            f"rename `{target.option}` to `{option.name}`: {why}",
            target.option,
            {"source": "docs", "option": option.name, "similarity": round(similarity, 3)},
            drops=dropped_values(values, tokens),
        )


def _described_as(old: str, option: OptionDoc) -> bool:
    """Whether ``option``'s name keeps some of ``old``'s meaning words and its description's first
    sentence holds every other one (``--apply-unsafe``; ``--unsafe``: "Apply unsafe fixes")."""
    wanted = set(content_words(old))
    kept = kept_words(wanted, {w for spelling in option.spellings for w in content_words(spelling)})
    if not kept or kept == wanted or not option.description:
        return False
    described = {singular(w) for w in re.findall(r"[a-z0-9]+", first_sentence(option.description).lower())}
    return all(any(word == x or x.startswith(word) for x in described) for word in wanted - kept)


def _flag_to_value(
    scene: Scene, page: CommandDoc, target: RejectedOption, span: tuple[int, int], values: tuple[str, ...]
) -> Iterator[Edit]:
    """The flag's meaning as a listed value of a documented option (``--a-b=on`` -> ``--b=a``).

    The flag must carry no value, or only a boolean one (``on``, ``true``).
    """
    if values and not is_boolean(values):
        return
    if target.option.startswith("--no-") or (values and values[0].lower() in _FALSE):
        return  # a negated flag means the opposite of the value its words would pick
    wanted = set(content_words(target.option))
    if not wanted:
        return
    for option in distinct_options(page):
        if target.option in option.spellings:
            continue
        listed = choices(option.value_hint, option.description)
        if not listed:
            continue
        name_words = set(content_words(option.name))
        for value in listed:
            value_words = set(content_words(value))
            on_value = wanted & value_words
            if not on_value:
                continue
            covered = len(wanted & (value_words | name_words)) / len(wanted)
            prior = 0.45 + 0.4 * covered
            token = f"{option.name}={value}" if option.name.startswith("--") else None
            tokens: tuple[str, ...] = (token,) if token else (option.name, value)
            # "Requires `--preview`": an option that only works with another brings it along.
            tokens += tuple(co_required(option, page, used=set(scene.argv)))
            yield Edit(
                "option_value",
                span[0],
                span[1],
                tokens,
                prior,
                f"`{target.option}` became a value of `{option.name}`, which lists `{value}` among "
                f"its values ({', '.join(listed[:8])}{', ...' if len(listed) > 8 else ''})",
                target.option,
                {"source": "docs", "option": option.name, "value": value, "values": list(listed[:20])},
                drops=values,
            )


def _to_positional(
    scene: Scene, page: CommandDoc, target: RejectedOption, span: tuple[int, int], values: tuple[str, ...]
) -> Iterator[Edit]:
    """``--file x`` -> ``x`` when the usage takes a positional argument named like the option."""
    if len(values) != 1 or is_boolean(values):
        return
    wanted = set(content_words(target.option))
    for form in page.forms:
        for placeholder in form.positionals:
            overlap = wanted & set(content_words(placeholder.name))
            if overlap:
                yield Edit(
                    "to_positional",
                    span[0],
                    span[1],
                    values,
                    0.5 + 0.3 * len(overlap) / len(wanted),
                    f"the usage `{form.text[:80]}` takes <{placeholder.name}> as an argument, "
                    f"not `{target.option}`",
                    target.option,
                    {"source": "docs", "placeholder": placeholder.name},
                )
                return


def _drop(
    scene: Scene,
    target: RejectedOption,
    span: tuple[int, int],
    values: tuple[str, ...],
    page: CommandDoc | None,
) -> Edit:
    hints = scene.hints
    ignored = any(r.index == target.index for r in hints.ignored)
    replaced = any(replacement_for(scene, replacement, target) for replacement in hints.replacements)
    if replaced:
        # The output names what to use instead: dropping the option would lose what it asked for.
        prior, why = 0.5, "the tool rejects it (though the output names a replacement)"
    elif ignored or hints.default_now:
        prior, why = 0.8, "the output says it is ignored, has no effect or is the default now"
    elif (negated := _negated_word(target.option)) and page is not None and not page.accepts(target.option):
        # Dropping `--no-update` does the updating it asked to avoid, unless that is the default now.
        if _default_not(page, negated):
            prior, why = 0.8, f"the docs say not to {negated} is the default now"
        else:
            prior, why = 0.45, f"dropping it undoes what `{target.option}` asked for"
    elif page is not None and not page.accepts(target.option) and not replaced_in_docs(page, target.option):
        prior, why = 0.66, "the documentation of the installed version no longer has it, nor anything like it"
    elif page is not None and not page.accepts(target.option):
        prior, why = 0.55, "the documentation of the installed version no longer has it"
    else:
        prior, why = 0.4, "the tool rejects it"
    return Edit(
        "drop_option",
        span[0],
        span[1],
        (),
        prior,
        f"drop `{' '.join(scene.argv[span[0] : span[1]])}`: {why}",
        target.option,
        {"source": "error" if ignored or hints.default_now else "docs"},
        drops=values,
    )


def _unspecified_option_edits(scene: Scene) -> Iterator[Edit]:
    """ "No dialect was specified": the documented ``--dialect``, with the listed value the task's own
    words name ("... (ANSI dialect)")."""
    page = scene.page
    if page is None or not scene.hints.unspecified:
        return
    meant = set(content_words(scene.intent))
    at = scene.program_length + len(scene.path)
    for name in scene.hints.unspecified:
        option = page.options.get(f"--{name}")
        if option is None or page.takes_value(option.name) is False:
            continue
        listed = choices(option.value_hint, option.description) or scene.hints.offered
        named = [value for value in listed if singular(value) in meant]
        if len(named) != 1:
            continue  # the task's words must pick exactly one value
        yield Edit(
            "add_option",
            at,
            at,
            (option.name, named[0]),
            0.82,
            f"the output says no {name} was given; `{option.name}` is documented and the task names "
            f"`{named[0]}`, one of its values",
            option.name,
            {"source": "error", "values": list(listed[:20])},
        )


_NEGATION = re.compile(r"^--(?:no|without|disable|skip|exclude)-(?P<word>[a-z][\w-]*)$")


def _negated_word(option: str) -> str:
    """What a negated flag asks not to do: ``--no-update`` -> ``update`` ("" for other options)."""
    match = _NEGATION.match(option)
    return match.group("word").replace("-", " ") if match else ""


def _default_not(page: CommandDoc, word: str) -> bool:
    """Whether the command's docs say it does not ``word`` by default: a sentence with "default", a
    negation and the word's stem ("By default, packages ... will not be updated")."""
    stem = word.split()[0][: max(4, len(word.split()[0]) - 2)]
    text = str(page.snippet.get("content") or "")
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        lowered = sentence.lower()
        if "default" in lowered and stem in lowered and re.search(r"\b(?:not|never|no)\b|n't\b", lowered):
            return True
    return False


def _required_option_edits(scene: Scene) -> Iterator[Edit]:
    """A flag the output says is required (on its own, or by an option used) is added."""
    page = scene.page
    at = scene.program_length + len(scene.path)
    for name in scene.hints.required_options:
        documented = page is not None and page.accepts(name)
        # `--no-config` for a documented `--config`: the negation most parsers derive (commander,
        # yargs, click, argparse's BooleanOptionalAction) and seldom list on its own.
        negation = (
            page is not None and not documented and name.startswith("--no-") and page.accepts("--" + name[5:])
        )
        if page is not None and page.takes_value(name):
            continue  # a value would have to come from somewhere: the positional moves cover that
        yield Edit(
            "add_option",
            at,
            at,
            (name,),
            0.85 if documented else 0.8 if negation else 0.6,
            f"the output says `{name}` is required"
            + (" and the docs document it" if documented else "")
            + (f" and the docs document `--{name[5:]}`, which it negates" if negation else ""),
            name,
            {"source": "error"},
        )


def _to_option_edits(scene: Scene) -> Iterator[Edit]:
    """A positional value becomes the required option of the usage that matches it best."""
    own = scene.own
    if own is None or not own.forms:
        return
    used = {use.name for use in scene.parsed.options}
    form = own.forms[0]
    missing = [group for group in form.required if not group & used]
    positionals = [value for value in scene.parsed.values if value.option is None]
    for group in missing:
        option = own.options.get(sorted(group)[0]) or OptionDoc(sorted(group)[0])
        best = max(
            ((score(facet, option), value) for value in positionals for facet in facets(value)),
            key=lambda item: item[0].points,
            default=None,
        )
        if best is None or best[0].points < WEAK:
            continue
        match, value = best
        yield Edit(
            "to_option",
            value.index,
            value.index + 1,
            (option.name, value.text),
            0.5 + 0.2 * min(1.0, match.points / STRONG),
            f"the usage requires `{option.name}`; `{value.text}` fits it ({', '.join(match.agreed)})",
            value.text,
            {"source": "docs", "option": option.name},
        )


# -- candidates --------------------------------------------------------------------------------------


def _candidate(scene: Scene, edits: Sequence[Edit], strategy: str) -> Candidate | None:
    argv = apply_edits(scene.argv, edits)
    if argv == scene.argv or (not argv[scene.program_length :] and scene.argv[scene.program_length :]):
        return None
    introduced = _introduced(scene.argv, argv)
    if introduced & INFORMATIONAL:
        return None  # `--help=unstable` exits 0 having done nothing the task asked
    names = [token.partition("=")[0] for token in argv if is_option(token)]
    if any(names.count(name) > 1 for name in introduced):
        return None  # two edits brought in the same option
    dropped = [token for edit in edits for token in edit.drops]
    check = check_against_docs(
        argv,
        scene.argv,
        scene.tree,
        program_length=scene.program_length,
        dropped=dropped,
        vouched=scene.hints.vouched_options,
    )
    prior = edits[0].prior if len(edits) == 1 else min(e.prior for e in edits) * _PAIR_FACTOR
    # An option the output called unknown, removed or ignored, still there as it was: the command
    # would meet the same complaint again.
    touched = {index for edit in edits for index in range(edit.start, edit.end)}
    if any(target.index not in touched for target in scene.hints.targets):
        prior *= _KEEPS_REJECTED_FACTOR
    confidence = round(min(_CAP, prior * check.factor), 4)
    return Candidate(
        argv=argv,
        strategy=strategy,
        confidence=confidence,
        rationale=_rationale(edits, check),
        evidence={
            "edits": [edit.to_dict() for edit in edits],
            "documented": check.documented,
            "docs_problems": check.problems(),
            "docs_factor": round(check.factor, 4),
            "entity_name": " ".join(check.path) if check.path_documented and check.path else None,
        },
    )


def _best_per_result(scene: Scene, edits: list[Edit]) -> list[Edit]:
    """One edit per (span, tokens): the best-evidenced one, a little stronger when the output and the
    documentation both lead to it."""
    best: dict[tuple[int, int, tuple[str, ...]], Edit] = {}
    for edit in edits:
        key = (edit.start, edit.end, edit.tokens)
        known = best.get(key)
        if known is None:
            best[key] = edit
            continue
        strong, weak = (edit, known) if edit.prior > known.prior else (known, edit)
        agreeing = strong.evidence.get("source") != weak.evidence.get("source")
        best[key] = replace(
            strong,
            prior=min(_CAP, strong.prior + (0.05 if agreeing else 0.0)),
            reason=f"{strong.reason}; also, {weak.reason}" if agreeing else strong.reason,
        )
    return list(best.values())


def _rationale(edits: Sequence[Edit], check: DocsCheck) -> str:
    text = "; ".join(edit.reason for edit in edits)
    if check.documented and not check.problems():
        return f"{text}. Every option and subcommand of the result is documented for this version."
    problems = check.problems()
    return f"{text}. " + ("Docs check: " + "; ".join(problems) + "." if problems else "")


def _introduced(before: Sequence[str], after: Sequence[str]) -> set[str]:
    """Option names and words ``after`` has that ``before`` has not."""
    names = {token.partition("=")[0] for token in before}
    return {token.partition("=")[0] for token in after} - names


# -- helpers -----------------------------------------------------------------------------------------
