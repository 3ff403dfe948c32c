"""Strategy (b): follow a replacement that the error output or the documentation names explicitly.

Tools that drop or rename something usually say what to use instead, in a handful of English
phrasings: "use X instead", "X has been renamed to Y", "X is deprecated, use Y", "did you mean X?",
"maybe you meant: X", "the most similar command is X". This strategy finds those phrases, works out
which token of the failed command they replace (named in the phrase, quoted in the error, or the
rejected option), and substitutes it. The same phrases in the failed command's documentation (an
option described as "no longer supported, use --y instead") are followed with less confidence.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from librarian.correction.candidates import Candidate, FailureInput
from librarian.correction.helpdocs import CommandDoc, documented_paths
from librarian.correction.names import keeps_meaning
from librarian.correction.values import ParsedCommand, is_option, parse_command, rejected_options

__all__ = ["ExplicitReplacement", "Replacement", "find_replacements"]

_QUOTES = "`'\"‘’“”"
_ITEM = r"(?:`[^`\n]+`|'[^'\n]+'|\"[^\"\n]+\"|‘[^’\n]+’|“[^”\n]+”|[^\s,;?!()]+)"
_ITEMS = rf"{_ITEM}(?:\s*(?:,|\bor\b|\band/or\b)\s*{_ITEM})*"
# "The --foo flag has been renamed": the thing renamed is the token before the noun.
_NOUN = r"(?:\s+(?:option|flag|switch|argument|parameter|command|subcommand|setting|keyword|key|attribute))?"
_PHRASES = (
    # "Please use '--track' or '--set-upstream-to' instead [of '--set-upstream']"
    re.compile(
        rf"(?i)\b(?:use|try|run|call|prefer)\s+(?P<new>{_ITEMS})\s+instead\b(?:\s+of\s+(?P<old>{_ITEM}))?"
    ),
    # "Use granular `--unstable-*` flags instead", "use the `--b` option instead": one quoted item
    # with a word or two around it.
    re.compile(
        rf"(?i)\b(?:use|try|prefer)\s+(?:[a-z]+\s+){{1,2}}(?P<new>`[^`\n]+`|'[^'\n]+'|\"[^\"\n]+\")"
        rf"(?:\s+[a-z]+)?\s+instead\b(?:\s+of\s+(?P<old>{_ITEM}))?"
    ),
    # "--a has been renamed to --b", "x was replaced by y", "x is superseded by y"
    re.compile(
        rf"(?i)(?P<old>{_ITEM}){_NOUN}\s+(?:has\s+been|have\s+been|was|were|is|are|will\s+be)\s+"
        rf"(?:renamed|replaced|superseded|moved)\s+(?:to|by|with|in\s+favou?r\s+of)\s+(?P<new>{_ITEMS})"
    ),
    # "--a is deprecated, use --b", "x is deprecated in favour of y"
    re.compile(
        rf"(?i)(?P<old>{_ITEM}){_NOUN}\s+(?:is|are|has\s+been|have\s+been)\s+deprecated\b[^\n.]*?"
        rf"(?:\buse\b|\bin\s+favou?r\s+of\b|\breplaced\s+by\b|\bprefer\b)\s+(?P<new>{_ITEMS})"
    ),
    # "renamed --a to --b"
    re.compile(rf"(?i)\brenamed\s+(?P<old>{_ITEM})\s+to\s+(?P<new>{_ITEMS})"),
    # "fix-mismatches → fix" (a list of renames printed as arrows)
    re.compile(rf"(?m)(?:^|\s)(?P<old>{_ITEM})\s*(?:→|->|=>)\s*(?P<new>{_ITEM})\s*$"),
)
_SUGGESTION = re.compile(
    r"(?i)\b(?:did\s+you\s+mean|maybe\s+you\s+meant|perhaps\s+you\s+meant|you\s+may\s+have\s+meant|"
    r"the\s+most\s+similar\s+(?:commands?|options?)\s+(?:is|are)|"
    # clap: "tip: a similar argument exists: '--x'", "some similar subcommands exist: 'a', 'b'"
    r"(?:an?|some)\s+similar\s+(?:arguments?|options?|flags?|(?:sub)?commands?|values?)\s+exists?)"
    r"(?:\s+one\s+of\s+these)?[ \t]*[:?]?(?P<rest>[^\n]*)"
)
_LIST_LINE = re.compile(r"^\s+(?:[*\-•]\s+)?(?P<item>\S+)\s*$")
_FROM_ERROR = 0.8
_FROM_DOCS = 0.65
_SPELLING_ONLY = 0.6


@dataclass(frozen=True)
class Replacement:
    """One replacement phrase: the old token if the phrase names it, the alternatives it offers.

    ``suggestion`` marks a tool's "did you mean": a near spelling, not a statement of what replaced
    what. An alternative may be a pattern (``--unstable-*``) that names a family of options.
    """

    old: str | None
    new: tuple[str, ...]
    text: str
    suggestion: bool = False


def find_replacements(text: str) -> list[Replacement]:
    """The replacement phrases in ``text``.

    Example:
        >>> text = "'--a' is no longer supported. Please use '--b' or '--c' instead."
        >>> [(r.old, r.new) for r in find_replacements(text)]
        [(None, ('--b', '--c'))]
        >>> [(r.old, r.new) for r in find_replacements("Invalid choice: 'x', maybe you meant:\\n\\n  * y\\n")]
        [(None, ('y',))]
    """
    found: list[Replacement] = []
    for pattern in _PHRASES:
        for match in pattern.finditer(text):
            new = tuple(n for n in (_clean(i) for i in _split_items(match.group("new"))) if n)
            old = _clean(match.group("old")) if match.group("old") else None
            if new:
                found.append(Replacement(old or None, new, _line_at(text, match.start())))
    for match in _SUGGESTION.finditer(text):
        items = [_clean(i) for i in _split_items(match.group("rest").strip())]
        if not any(items):
            items = list(_listed_below(text, match.end()))
        new = tuple(i for i in items if i)
        if new:
            found.append(Replacement(None, new, _line_at(text, match.start()), suggestion=True))
    return found


class ExplicitReplacement:
    """Substitute the token an error (or the docs) names a replacement for.

    Confidence starts at 0.8 for a phrase in the error output and 0.65 for one in the docs; it is
    lowered when the replaced token had to be inferred (by quoting or similarity) and for every
    alternative after the most similar one, raised a little when the docs of the command confirm the
    new option or subcommand exists, and lowered when they document the command without it.
    """

    name = "explicit_replacement"

    def propose(self, failure: FailureInput) -> list[Candidate]:
        """Candidates for every replacement phrase that maps onto a token of the failed command."""
        docs = failure.command_docs()
        tool = docs[0].tool if docs else None
        parsed = parse_command(failure.argv, failure.workspace, tool=tool, known_paths=documented_paths(docs))
        candidates: list[Candidate] = []
        for source, base, replacement, implied_old in self._phrases(failure, parsed, docs):
            candidates.extend(self._candidates(failure, parsed, docs, source, base, replacement, implied_old))
        return candidates

    def _phrases(
        self, failure: FailureInput, parsed: ParsedCommand, docs: list[CommandDoc]
    ) -> Iterator[tuple[str, float, Replacement, str | None]]:
        for replacement in find_replacements(failure.output):
            yield "error", _FROM_ERROR, replacement, None
        own = next((d for d in docs if d.path == parsed.command_path), None)
        if own is None:
            return
        # An option the failed command uses, described in its own docs as replaced.
        for use in parsed.options:
            option_doc = own.options.get(use.name)
            if option_doc is None:
                continue
            for replacement in find_replacements(option_doc.description):
                yield "docs", _FROM_DOCS, replacement, use.name

    def _candidates(
        self,
        failure: FailureInput,
        parsed: ParsedCommand,
        docs: list[CommandDoc],
        source: str,
        base: float,
        replacement: Replacement,
        implied_old: str | None,
    ) -> list[Candidate]:
        argv = list(failure.argv)
        old_index, how = _old_index(replacement, implied_old, argv, failure.output, parsed)
        if old_index is None:
            return []
        old_token = argv[old_index].partition("=")[0] if is_option(argv[old_index]) else argv[old_index]
        ranked = sorted(replacement.new, key=lambda n: -_similarity(old_token, n))
        out: list[Candidate] = []
        for rank, new in enumerate(ranked):
            if "*" in new:
                continue  # a family of options ("--unstable-*"): command edits pick its member
            fixed = _substitute(argv, old_index, new, parsed)
            if fixed is None or fixed == argv:
                continue
            confidence = base * {"named": 1.0, "quoted": 0.95, "similar": 0.85}[how]
            confidence *= 1.0 if rank == 0 else 0.85
            if replacement.suggestion and not keeps_meaning(old_token, new.split()[0].partition("=")[0]):
                confidence *= _SPELLING_ONLY  # "a similar argument exists": a spelling, not a meaning
            confidence *= _docs_factor(fixed, old_index, new, parsed, docs)
            confidence = min(confidence, 0.95)
            where = (
                "the error output" if source == "error" else f"the docs of `{' '.join(parsed.command_path)}`"
            )
            out.append(
                Candidate(
                    argv=fixed,
                    strategy=self.name,
                    confidence=round(confidence, 4),
                    rationale=(
                        f"{where} says to use `{new}` in place of `{old_token}`"
                        + (
                            f" (one of {len(ranked)} alternatives, the closest to it)"
                            if rank == 0 and len(ranked) > 1
                            else ""
                        )
                        + f': "{replacement.text}"'
                    ),
                    evidence={
                        "source": source,
                        "text": replacement.text,
                        "old": old_token,
                        "new": new,
                        "old_identified_by": how,
                        **(_doc_evidence(docs, parsed) if source == "docs" else {}),
                    },
                )
            )
        return out


def _old_index(
    replacement: Replacement, implied_old: str | None, argv: list[str], output: str, parsed: ParsedCommand
) -> tuple[int | None, str]:
    """The argv index of the token to replace, and how it was identified (named, quoted, similar)."""
    named = replacement.old or implied_old
    if named:
        index = _find_token(named, argv)
        return (index, "named") if index is not None else (None, "")
    wants_option = replacement.new[0].startswith("-")
    quoted = {_clean(q) for q in re.findall(rf"[{_QUOTES}]([^{_QUOTES}\s]+)[{_QUOTES}]", output)}
    quoted |= {r.option for r in rejected_options(output, argv)}
    pool: list[tuple[int, str]] = []
    for index, token in enumerate(argv[1:], start=1):
        if index < len(parsed.program):
            continue
        if is_option(token) != wants_option:
            continue
        bare = token.partition("=")[0] if is_option(token) else token
        if bare in quoted or bare.lstrip("-") in quoted:
            pool.append((index, "quoted"))
    if not pool:
        # No token is quoted: the most similar one of the same sort, if it is similar enough.
        scored = [
            (max(_similarity(t.partition("=")[0], n) for n in replacement.new), i)
            for i, t in enumerate(argv)
            if i >= len(parsed.program) and is_option(t) == wants_option
        ]
        best = max(scored, default=(0.0, -1))
        return (best[1], "similar") if best[0] >= 0.6 else (None, "")
    index, how = max(pool, key=lambda item: max(_similarity(argv[item[0]], n) for n in replacement.new))
    return index, how


def _find_token(name: str, argv: list[str]) -> int | None:
    spellings = [name] if name.startswith("-") else [name, f"--{name}", f"-{name}"]
    for spelling in spellings:
        for index, token in enumerate(argv[1:], start=1):
            if token == spelling or (spelling.startswith("-") and token.startswith(spelling + "=")):
                return index
    return None


def _substitute(argv: list[str], index: int, new: str, parsed: ParsedCommand) -> list[str] | None:
    words = new.split()
    if not words:
        return None
    program_name = os.path.basename(parsed.program[-1]) if parsed.program else ""
    if len(words) > 1 and words[0] == program_name:
        words = words[1:]  # "use `tool sub` instead": the program stays as the user spelled it
    old = argv[index]
    if is_option(old) and len(words) == 1 and words[0].startswith("-"):
        _, eq, value = old.partition("=")
        words = [f"{words[0]}={value}" if eq else words[0]]
    elif is_option(old) != words[0].startswith("-"):
        return None  # an option is replaced by an option, a word by a word
    return [*argv[:index], *words, *argv[index + 1 :]]


def _docs_factor(
    fixed: list[str], index: int, new: str, parsed: ParsedCommand, docs: Sequence[CommandDoc]
) -> float:
    if not docs:
        return 1.0
    if new.startswith("-"):
        own = next((d for d in docs if d.path == parsed.command_path), None)
        if own is None:
            return 1.0
        return 1.1 if own.accepts(new.split()[0]) else 0.6
    # The subcommand path up to the replaced word, as the fixed command spells it.
    new_path = tuple(fixed[len(parsed.program) : index + len(new.split())])
    return 1.1 if any(d.path == new_path for d in docs) else 1.0


def _doc_evidence(docs: Sequence[CommandDoc], parsed: ParsedCommand) -> dict[str, object]:
    own = next((d for d in docs if d.path == parsed.command_path), None)
    if own is None:
        return {}
    return {"entity_name": own.snippet.get("entity_name"), "source_url": own.snippet.get("source_url")}


def _similarity(old: str, new: str) -> float:
    return difflib.SequenceMatcher(None, old.lstrip("-").lower(), new.lstrip("-").lower()).ratio()


def _split_items(text: str) -> list[str]:
    return [i for i in re.findall(_ITEM, text) if i.lower() not in {"or", "and/or", "and"}]


def _listed_below(text: str, position: int) -> Iterator[str]:
    """Items listed one per indented (or bulleted) line after a "did you mean" line."""
    lines = text[position:].split("\n")[1:]
    started = False
    for line in lines[:20]:
        if not line.strip():
            if started:
                return
            continue
        item = _LIST_LINE.match(line)
        if not item:
            return
        started = True
        yield _clean(item.group("item"))


def _clean(item: str) -> str:
    item = item.strip().strip(_QUOTES).strip()
    item = item.rstrip(".:;,?!")
    # "--set-upstream-to=<upstream>" names the option; the placeholder is not part of it.
    item = re.sub(r"(?:=|\s+)?<[^>]*>$", "", item)
    return item.strip(_QUOTES)


def _line_at(text: str, position: int) -> str:
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    return text[start : end if end != -1 else len(text)].strip()[:300]
