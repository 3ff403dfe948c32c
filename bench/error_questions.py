"""A labelled set of error-driven research questions, built from a CLI's own help as ingested.

Each worked example of a command (``librarian ingest-cli`` keeps them as ``example`` chunks) gives a
question and a label: the question is the example's title or first sentence ("Upload an object to
Amazon S3"), the error is the one the CLI prints when an option is used on a command that does not
accept it (``Unknown options: --tagging,compliance=strict``), with an option and value taken from the
example's own command line, and the right answer is the example's command. Only options that more
than one command accepts are used, so the option alone never decides the answer.

Each question also carries the command line an agent would have run: a sibling of the answer (a
command of the same group, ``dynamodb update-item`` for ``dynamodb put-item``) that does not accept
the option, which is why it failed. The calibration asks half the questions with it.

Limitation, stated where the figures are reported: the questions are phrased by the documentation's
authors, so they are closer to the docs' wording than an agent's questions would be.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass

from sqlalchemy import select

from librarian.app import Librarian
from librarian.storage.models import Chunk

_TITLE = re.compile(r"^(?:example\s*\d*\s*[:.)-]\s*)(.+)$", re.IGNORECASE)
_LEAD = re.compile(r"^(?:the\s+following\s+(?:[\w-]+\s+){0,3}(?:example|command)s?\s*)", re.IGNORECASE)
# An option and, on the same line, its value when it has one (flags have none).
_OPTION_VALUE = re.compile(r"(?<![\w-])(--[a-z][\w-]*)(?:[ \t]+(?![-\\`])(\S+))?")


@dataclass(frozen=True)
class ErrorQuestion:
    """One labelled question: ask ``query`` with ``error``; the answer is ``entity``."""

    qid: str
    query: str
    error: str
    entity: str
    # ``aws dynamodb update-item --tagging x``: a sibling command that refused the option.
    failed_command: str | None = None


def error_questions(lib: Librarian, sdk_name: str, per_entity: int = 4) -> list[ErrorQuestion]:
    """Questions from every example chunk of ``sdk_name`` (see the module docstring)."""
    with lib.sessions() as session:
        chunks = session.scalars(
            select(Chunk).where(Chunk.sdk_name == sdk_name, Chunk.entity_type == "example")
        ).all()
        accepted_by: Counter[str] = Counter()
        declared_by: dict[str, set[str]] = {}
        program = ""
        seen: set[tuple[str | None, str]] = set()
        for chunk in session.scalars(select(Chunk).where(Chunk.sdk_name == sdk_name)):
            key = (chunk.entity_name, chunk.source_url)
            if key in seen:
                continue
            seen.add(key)
            options = set((chunk.attributes or {}).get("options") or [])
            accepted_by.update(options)
            declared_by[chunk.entity_name or ""] = options
            program = program or str((chunk.attributes or {}).get("command") or "")
    questions: list[ErrorQuestion] = []
    made: Counter[str] = Counter()
    for chunk in chunks:
        entity = chunk.entity_name or ""
        if made[entity] >= per_entity:
            continue
        query = _question(chunk.content)
        declared = set((chunk.attributes or {}).get("options") or [])
        code = "\n".join(re.findall(r"```\n(.*?)```", chunk.content, re.DOTALL))
        pairs = [
            (option, value.strip("'\""))
            for option, value in _OPTION_VALUE.findall(code)
            if option in declared and accepted_by[option] > 1
        ]
        if not query or not pairs:
            continue
        # The rarest shared option: drift errors name specific options, not ``--bucket``.
        option, value = min(pairs, key=lambda pair: accepted_by[pair[0]])
        made[entity] += 1
        sibling = _sibling(entity, option, declared_by)
        questions.append(
            ErrorQuestion(
                qid=f"{entity}#{made[entity]}",
                query=query,
                error=f"Unknown options: {option},{value}" if value else f"Unknown options: {option}",
                entity=entity,
                failed_command=f"{program} {sibling} {option} {value}".strip() if sibling else None,
            )
        )
    return questions


def _sibling(entity: str, option: str, declared_by: dict[str, set[str]]) -> str | None:
    """A command of ``entity``'s group that does not accept ``option`` (chosen by hash, reproducibly)."""
    group = entity.split(" ", 1)[0]
    siblings = sorted(
        (name for name, options in declared_by.items() if name != entity and name.split(" ", 1)[0] == group),
        key=lambda name: hashlib.sha1(f"{entity}|{name}".encode()).hexdigest(),
    )
    return next((name for name in siblings if option not in declared_by[name] and " " in name), None)


def _question(content: str) -> str | None:
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    if not lines:
        return None
    title = _TITLE.match(lines[0])
    if title:
        text = title.group(1)
    else:
        prose = next((line for line in lines[1:] if not line.startswith(("```", "aws ", "$"))), "")
        text = _LEAD.sub("", prose).split(":")[0]
    text = re.sub(r"^to\s+", "", text.strip().rstrip(".:"), flags=re.IGNORECASE)
    return f"how to {text[0].lower()}{text[1:]}" if len(text) > 8 else None
