"""JSON answers that match a schema, with repair turns: how planners and correctors talk to an LLM.

Models wrap JSON in code fences, add a sentence before it, or miss a required field. Rather than
trusting the first answer, :func:`complete_json` extracts the object, validates it with
``jsonschema`` and, when it is unusable, shows the model its own answer and the exact problem and asks
again, a bounded number of times.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from jsonschema import exceptions as schema_exceptions
from jsonschema import validators
from jsonschema.protocols import Validator

from librarian.errors import InvalidInputError
from librarian.llm.base import ChatMessage, LLMClient, LLMOutputError, endpoint_of

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\n(.*?)```", re.DOTALL)
# Scanning every ``{`` of a long answer with ``raw_decode`` is quadratic; real answers put the object
# within the first few braces.
_MAX_BRACES_TRIED = 64
_MAX_ERRORS_SHOWN = 3
_PROBLEM_CHARS = 300


def complete_json(
    client: LLMClient,
    messages: Sequence[ChatMessage],
    schema: dict[str, Any],
    *,
    system: str | None = None,
    max_attempts: int = 3,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """Ask ``client`` for a JSON object valid against ``schema``, repairing bad answers.

    The schema is added to the system prompt. An answer that holds no JSON object, or one that fails
    validation, is followed by a *repair turn*: the bad answer as the assistant's turn and a user turn
    naming the problem (``at $.steps[0]: 'name' is a required property``), then the model is asked
    again, up to ``max_attempts`` answers in all.

    Args:
        client: the LLM.
        messages: the request, oldest turn first.
        schema: a JSON Schema whose top level describes an object.
        system: instructions placed before the JSON instructions.
        max_attempts: answers asked for at most (at least 1).
        max_tokens: answer length limit; the client's default when None.

    Returns:
        The first valid object.

    Raises:
        InvalidInputError: ``schema`` is not a valid JSON Schema, or ``max_attempts`` < 1.
        LLMOutputError: no answer was valid; the message names the last problem.
        LLMError: the endpoint failed (not retried here: the client already retries transport errors).

    Example:
        >>> plan = complete_json(llm, [ChatMessage("user", "Plan: upload a file")],
        ...                      {"type": "object", "required": ["steps"]})  # doctest: +SKIP
    """
    if max_attempts < 1:
        raise InvalidInputError(f"max_attempts must be at least 1, got {max_attempts}")
    validator = _validator(schema)
    instructions = (
        "Answer with one JSON object and nothing else: no prose, no code fences. "
        f"It must validate against this JSON Schema:\n{json.dumps(schema, sort_keys=True)}"
    )
    full_system = f"{system}\n\n{instructions}" if system else instructions
    conversation = list(messages)
    problem = answer = ""
    for _ in range(max_attempts):
        answer = client.complete(conversation, system=full_system, max_tokens=max_tokens, temperature=0.0)
        try:
            value = extract_json_object(answer)
        except ValueError as exc:
            problem = str(exc)
        else:
            found = schema_problem(validator, value)
            if found is None:
                return value
            problem = found
        conversation += [
            ChatMessage("assistant", answer),
            ChatMessage(
                "user",
                f"That answer cannot be used: {problem}\n"
                "Reply again with only the corrected JSON object, valid against the schema.",
            ),
        ]
    endpoint = endpoint_of(client)
    raise LLMOutputError(
        f"the LLM ({client.model_name}) gave no valid JSON in {max_attempts} attempt"
        f"{'s' if max_attempts > 1 else ''}; last problem: {problem}",
        endpoint=endpoint,
        last_problem=problem,
        last_answer=answer,
    )


def extract_json_object(text: str) -> dict[str, Any]:
    """The JSON object in ``text``: the whole text, a fenced ```json block, or one amid prose.

    Raises:
        ValueError: no JSON object found; the message says why (the parser's error, or the kind of
            JSON value found instead of an object).
    """
    candidates = [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
        # A whole answer (or fence) that is an array is a wrong answer, not prose to search in.
        raise ValueError(f"the answer is a JSON {_json_kind(value)}, not an object")
    return _object_amid_prose(text)


def _object_amid_prose(text: str) -> dict[str, Any]:
    decoder = json.JSONDecoder()
    first_error: str | None = None
    # Where the earliest failed parse stopped: a brace before it is inside that broken object (say,
    # a truncated answer), and the fragment it starts is not the answer.
    covered_until = -1
    start = text.find("{")
    tried = 0
    while start != -1 and tried < _MAX_BRACES_TRIED:
        if start >= covered_until:
            tried += 1
            try:
                value, _ = decoder.raw_decode(text, start)
            except json.JSONDecodeError as exc:
                covered_until = max(covered_until, exc.pos)
                first_error = first_error or f"{exc.msg} at character {exc.pos}"
            else:
                if isinstance(value, dict):
                    return value
        start = text.find("{", start + 1)
    if first_error is None:
        raise ValueError("the answer contains no JSON object (no '{' at all)")
    raise ValueError(f"the answer contains no valid JSON object: {first_error}")


def schema_problem(validator: Validator, value: dict[str, Any]) -> str | None:
    """The validation problems of ``value`` (best first, with their JSON paths), or None when valid."""
    errors = list(validator.iter_errors(value))
    if not errors:
        return None
    best = schema_exceptions.best_match(errors)
    ordered = [best] + [e for e in errors if e is not best]
    shown = "; ".join(f"at {e.json_path}: {e.message[:_PROBLEM_CHARS]}" for e in ordered[:_MAX_ERRORS_SHOWN])
    more = len(errors) - _MAX_ERRORS_SHOWN
    return shown + (f" (and {more} more)" if more > 0 else "")


def _validator(schema: dict[str, Any]) -> Validator:
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except schema_exceptions.SchemaError as exc:
        raise InvalidInputError(
            f"the JSON schema given to complete_json is invalid at {exc.json_path}: {exc.message}"
        ) from exc
    validator: Validator = cls(schema)
    return validator


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"
