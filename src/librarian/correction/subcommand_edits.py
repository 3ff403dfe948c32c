"""Command-line edits about words: subcommands inserted, replaced or set, and option values changed.

The generators of :mod:`~librarian.correction.command_edits` for a word of the command line: a
command line the output suggests ("Use `tool check <path>` instead"), a documented sibling of a word
called an invalid choice, the documented subcommand that takes the command's arguments when a
subcommand is now required, an option that became a subcommand, and a value the tool no longer knows
replaced by a listed one that holds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from librarian.correction.choices import choices
from librarian.correction.command_scene import (
    Scene,
)
from librarian.correction.edits import Edit
from librarian.correction.helpdocs import CommandDoc
from librarian.correction.names import content_words, name_similarity
from librarian.correction.values import (
    RejectedOption,
    classify_value,
    is_option,
)

__all__ = [
    "missing_subcommand_edits",
    "option_to_subcommand",
    "required_subcommand_edits",
    "template_edits",
    "word_edits",
]


_DEFAULT_COMMAND = re.compile(r"(?i)\(default\)|\bdefault (?:sub)?command\b|\bthe default\b")


def word_edits(scene: Scene, index: int, word: str) -> Iterator[Edit]:
    """A plain word called invalid: replace it by a documented sibling, or insert a subcommand before it;
    an option's value called invalid: another of the option's listed values, or the option goes."""
    owner = _value_owner(scene, index)
    if owner is not None:
        yield from _value_edits(scene, index, word, owner)
        return
    parent = scene.tree.longest_prefix(scene.argv[scene.program_length : index])
    siblings = scene.tree.children(parent)
    suggested = {n for r in scene.hints.replacements for n in r.new if not is_option(n)}
    for doc in siblings:
        candidate = doc.path[-1]
        similarity = name_similarity(word, candidate)
        if candidate in suggested:
            prior = 0.75 + 0.15 * similarity
        elif similarity >= 0.6:
            prior = 0.45 + 0.4 * similarity
        else:
            continue
        yield Edit(
            "replace_subcommand",
            index,
            index + 1,
            (candidate,),
            prior,
            f"`{word}` is not a command here; `{' '.join(doc.path)}` is documented"
            + (
                " and the output suggests it" if candidate in suggested else f" (similarity {similarity:.2f})"
            ),
            word,
            {"source": "error" if candidate in suggested else "docs"},
            drops=(word,),
        )
    if classify_value(word, scene.workspace).kind == "word" and not scene.hints.subcommand_required:
        return
    # A value (a file, a URL) where a subcommand is expected: the bare form of the command is gone.
    for doc in siblings:
        yield _inserted_subcommand(
            scene, index, doc, f"`{word}` is taken for a subcommand, so one is required now"
        )


def _value_owner(scene: Scene, index: int) -> int | None:
    """The argv index of the option whose value the token at ``index`` is, or ``None``."""
    use = next((u for u in scene.parsed.options if index in u.value_indices), None)
    return use.index if use is not None else None


def _value_edits(scene: Scene, index: int, word: str, owner: int) -> Iterator[Edit]:
    """An option's value the tool rejects: a listed value related to it, else the option and value go."""
    token = scene.argv[owner]
    name, eq, attached = token.partition("=")
    value = attached if eq else word
    page = scene.page
    option = page.options.get(name) if page is not None else None
    listed = choices(option.value_hint, option.description) if option is not None else ()
    listed = listed or tuple(n for r in scene.hints.replacements for n in r.new if not is_option(n))
    span = (owner, owner + 1) if eq else (owner, index + 1)
    related = [(name_similarity(value, choice), choice) for choice in listed if choice != value]
    related = [item for item in related if item[0] >= 0.5 or _contains(value, item[1])]
    for similarity, choice in sorted(related, reverse=True):
        tokens = (f"{name}={choice}",) if eq else (name, choice)
        yield Edit(
            "option_value",
            span[0],
            span[1],
            tokens,
            0.5 + 0.35 * max(similarity, 0.8 if _contains(value, choice) else 0.0),
            f"`{value}` is no longer a value of `{name}`; it lists `{choice}`",
            value,
            {"source": "docs", "values": list(listed[:20])},
            drops=(value,),
        )
    if not related:
        yield Edit(
            "drop_option",
            span[0],
            span[1],
            (),
            0.66 if listed else 0.5,
            f"drop `{' '.join(scene.argv[span[0] : span[1]])}`: `{value}` is not among the values "
            f"`{name}` lists, and none of them is like it",
            value,
            {"source": "docs"},
            drops=(value,),
        )


def _contains(old: str, new: str) -> bool:
    """One value holds the other whole (``postcss`` and ``css``), with at least three letters."""
    a, b = old.lower(), new.lower()
    shorter, longer = sorted((a, b), key=len)
    return (
        len(shorter) >= 3 and shorter != longer and (longer.endswith(shorter) or longer.startswith(shorter))
    )


def template_edits(scene: Scene) -> Iterator[Edit]:
    """The command line the output suggests: its subcommand path, the failed command's arguments kept."""
    start = scene.program_length
    current = scene.path
    for template in scene.hints.templates:
        words = template.words
        documented = scene.tree.command(words) is not None or not scene.tree
        prior = 0.88 if documented else 0.75
        if words[: len(current)] == current:
            tokens, span, kind = (
                words[len(current) :],
                (start + len(current), start + len(current)),
                "insert_subcommand",
            )
        else:
            tokens, span, kind = words, (start, start + len(current)), "set_subcommand"
        if not tokens and span[0] == span[1]:
            continue
        yield Edit(
            kind,  # type: ignore[arg-type]
            span[0],
            span[1],
            tuple(tokens),
            prior,
            f'the output suggests `{" ".join(words)}`: "{template.text}"',
            "subcommand",
            {"source": "error", "text": template.text},
            drops=tuple(current) if kind == "set_subcommand" else (),
        )


def required_subcommand_edits(scene: Scene) -> Iterator[Edit]:
    """The output says a subcommand is needed: the documented one that takes every option used."""
    hints = scene.hints
    if not hints.subcommand_required or hints.templates:
        return
    at = scene.program_length + len(scene.path)
    for doc in scene.tree.children(scene.path):
        yield _inserted_subcommand(scene, at, doc, "the output says a subcommand is required")


def missing_subcommand_edits(scene: Scene) -> Iterator[Edit]:
    """The tool's usage wants a subcommand and the command gives none: each documented one, weakly.

    Paired with an edit of a rejected option, this is how ``tool -c file`` becomes ``tool run file``.
    """
    root = scene.tree.command(())
    if scene.path or root is None or scene.hints.subcommand_required or scene.hints.templates:
        return
    wants = any(
        p.name.lower().strip("[]<>.") in ("command", "subcommand", "cmd")
        for f in root.forms
        for p in f.positionals
    ) or bool(re.search(r"(?i)<command>|\[command\]|\bCOMMAND\b", root.synopsis))
    if not wants:
        return
    at = scene.program_length
    for doc in scene.tree.children(()):
        because = "the tool's usage wants a subcommand and the command gives none"
        yield _inserted_subcommand(scene, at, doc, because, lower=0.05)


def option_to_subcommand(scene: Scene, target: RejectedOption) -> Iterator[Edit]:
    """An option that became a subcommand: ``tool --clean`` -> ``tool clean``, ``--explain X`` -> ``rule X``
    (the subcommand's own description says what the option said)."""
    if target.index != scene.program_length + len(scene.path):
        return  # only an option right where a subcommand would go
    wanted = set(content_words(target.option))
    for doc in scene.tree.children(scene.path):
        name = doc.path[-1]
        summary = set(content_words(" ".join(str(doc.snippet.get("content") or "").split()[:40])))
        if name == target.option.lstrip("-"):
            prior, why = 0.82, f"`{name}` is a documented subcommand now"
        elif wanted and wanted & summary and len(wanted & summary) / len(wanted) >= 0.5:
            prior, why = 0.62, f"`{' '.join(doc.path)}` is documented as doing what `{target.option}` said"
        else:
            continue
        yield Edit(
            "set_subcommand",
            target.index,
            target.index + 1,
            (name,),
            prior,
            f"`{target.option}` became a subcommand: {why}",
            target.option,
            {"source": "docs"},
        )


def _inserted_subcommand(scene: Scene, at: int, doc: CommandDoc, because: str, *, lower: float = 0.0) -> Edit:
    """Insert ``doc``'s subcommand at ``at``, ranked by how well it fits the failed command (``lower``
    for weaker grounds)."""
    prior, why = _subcommand_prior(scene, doc)
    return Edit(
        "insert_subcommand",
        at,
        at,
        (doc.path[-1],),
        prior - lower,
        f"{because}: `{' '.join(doc.path)}` {why}",
        "subcommand",
        {"source": "docs"},
    )


def _subcommand_prior(scene: Scene, doc: CommandDoc) -> tuple[float, str]:
    """How well a documented subcommand fits the failed command: it takes every option used, it is
    described as the default, research ranked it for the task's words."""
    used = [use.name for use in scene.parsed.options]
    accepted = all(doc.accepts(name) for name in used)
    described = bool(_DEFAULT_COMMAND.search(str(doc.snippet.get("content") or "")[:400]))
    rank = scene.researched.index(doc.path) if doc.path in scene.researched else None
    prior = 0.45 + (0.12 if accepted else 0.0) + (0.15 if described else 0.0)
    prior += 0.2 / (1 + rank) if rank is not None else 0.0
    reasons = ["is documented"]
    if accepted:
        reasons.append("takes every option used" if used else "takes the arguments")
    if described:
        reasons.append("is described as the default")
    if rank is not None:
        reasons.append(f"is research's #{rank + 1} match for the task")
    return prior, ", ".join(reasons)
