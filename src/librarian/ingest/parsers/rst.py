"""reStructuredText parser built on docutils, tolerant of Sphinx-only markup.

The doctree is rendered to Markdown-like text: inline literals become backticks and literal blocks
become fenced code, so the chunker handles every format the same way. Three liberties are taken so
that real-world Sphinx and AWS CLI sources index well:

* Unknown directives (``.. py:function::``, ``.. versionadded::``, ``.. toctree::`` ...) do not turn
  into error messages: their content is parsed as ordinary reStructuredText, Sphinx object
  descriptions (functions, classes, options, programs) become sub-sections of their own, and a few
  purely navigational directives are dropped.
* Unknown interpreted-text roles (``:ref:``, ``:py:func:`` ...) render as their text.
* A paragraph made of a single bold phrase (``**To set a tag on an object**``) starts a sub-section,
  because many documents, the AWS CLI examples among them, use that instead of section headings.

Only the docutils parser runs, not its transforms, with file insertion and raw output disabled:
nothing is read from disk or the network, and system messages are skipped when rendering.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from docutils import frontend, nodes, utils
from docutils.parsers import rst
from docutils.parsers.rst import directives, roles, states

from librarian.ingest.parsed import ParsedDocument, ParseError, Section
from librarian.ingest.parsers.markdown import code_span, fence

__all__ = ["parse_rst"]

# docutils guards its inline parser against pathological lines with this limit (default 10 000);
# beyond it docutils silently drops the whole document, so longer lines are refused with a clear
# error instead. Generated reference pages do have long lines, hence the generous value.
MAX_LINE_LENGTH = 100_000

# Sphinx object descriptions that document one entity: each becomes a section of its own.
_OBJECT_DIRECTIVES: dict[str, str] = {
    "function": "function",
    "method": "function",
    "classmethod": "function",
    "staticmethod": "function",
    "decorator": "function",
    "decoratormethod": "function",
    "class": "class",
    "exception": "class",
    "attribute": "attribute",
    "property": "attribute",
    "data": "attribute",
    "option": "option",
    "cmdoption": "option",
    "confval": "option",
    "envvar": "option",
    "program": "command",
    "describe": "section",
    "object": "section",
}

# Navigation and build instructions carry no prose worth indexing.
_DROPPED_DIRECTIVES = frozenset(
    {"toctree", "index", "highlight", "literalinclude", "autosummary", "tabularcolumns", "currentmodule"}
)

# Directives whose content is code, not reStructuredText.
_CODE_DIRECTIVES = frozenset(
    {"testcode", "testoutput", "testsetup", "testcleanup", "doctest", "prompt", "ipython", "code-cell"}
)

_VERSION_DIRECTIVES: dict[str, str] = {
    "versionadded": "New in version {}.",
    "versionchanged": "Changed in version {}.",
    "deprecated": "Deprecated since version {}.",
    "versionremoved": "Removed in version {}.",
}

# Roles whose text is prose (a link label), not a code identifier.
_PROSE_ROLES = frozenset({"ref", "doc", "term", "numref", "download", "abbr", "guilabel", "menuselection"})

_ROLE_TARGET = re.compile(r"^(?P<label>.*?)\s*<[^<>]*>$", re.DOTALL)


class _ObjectDescription(nodes.container):  # type: ignore[misc]
    """A Sphinx object description (``.. py:function:: f(x)``); rendered as a sub-section."""


class _AnyOption(dict[str, Callable[[str | None], Any]]):
    """Accepts every directive option, because unknown directives have unknown options."""

    def __missing__(self, key: str) -> Callable[[str | None], Any]:
        unchanged: Callable[[str | None], Any] = directives.unchanged
        return unchanged


class _GenericDirective(rst.Directive):  # type: ignore[misc]
    """Stands in for any directive docutils does not know (mostly Sphinx ones)."""

    optional_arguments = 1
    final_argument_whitespace = True
    # Non-empty so docutils parses the option block; every other key is accepted by __missing__.
    option_spec: ClassVar[dict[str, Callable[[str | None], Any]]] = _AnyOption(noindex=directives.unchanged)
    has_content = True

    def run(self) -> list[nodes.Node]:
        name = self.name.lower().rsplit(":", 1)[-1]
        argument = self.arguments[0].strip() if self.arguments else ""
        if name in _DROPPED_DIRECTIVES:
            return []
        if name in _CODE_DIRECTIVES:
            code = "\n".join(self.content)
            return [nodes.literal_block(code, code)] if code.strip() else []
        if name in _OBJECT_DIRECTIVES and argument:
            obj = _ObjectDescription(objtype=_OBJECT_DIRECTIVES[name], signature=argument)
            self.state.nested_parse(self.content, self.content_offset, obj)
            return [obj]
        container = nodes.container()
        if name in _VERSION_DIRECTIVES and argument:
            container += nodes.paragraph(text=_VERSION_DIRECTIVES[name].format(argument))
        elif argument and name not in {"only", "ifconfig"}:
            container += nodes.paragraph(text=argument)
        self.state.nested_parse(self.content, self.content_offset, container)
        return [container]


class _LenientStateMixin:
    """Mixed into every docutils parser state so nested parsing keeps using the lenient states."""

    # docutils caches nested state machines in a class attribute shared by every state; ours must
    # not be handed to (or borrowed from) plain docutils parsing elsewhere in the process.
    nested_sm_cache: ClassVar[list[Any]] = []

    def __init__(self, state_machine: Any, debug: bool = False) -> None:
        super().__init__(state_machine, debug)  # type: ignore[call-arg]
        # docutils builds nested parsers from its module-level state list; point them at ours.
        self.nested_sm_kwargs = {"state_classes": _STATE_CLASSES, "initial_state": "Body"}


def _directive(state: Any, match: re.Match[str], **option_presets: Any) -> Any:
    """``Body.directive`` that hands unknown directives to :class:`_GenericDirective`."""
    type_name = match.group(1)
    directive_class, messages = directives.directive(type_name, state.memo.language, state.document)
    state.parent += messages
    return state.run_directive(directive_class or _GenericDirective, match, type_name, option_presets)


# Body dispatches explicit markup through function objects captured in this table when the class is
# defined, so overriding the ``directive`` method would not be enough: the table itself is replaced.
_EXPLICIT = states.Struct(
    patterns=states.Body.explicit.patterns,
    constructs=[
        (_directive if method is states.Body.directive else method, pattern)
        for method, pattern in states.Body.explicit.constructs
    ],
)


def _lenient(cls: type[Any]) -> type[Any]:
    attributes: dict[str, Any] = {"explicit": _EXPLICIT} if issubclass(cls, states.Body) else {}
    return type(cls.__name__, (_LenientStateMixin, cls), attributes)


# The state machine finds states by class name, so each subclass keeps its base's name.
_STATE_CLASSES: tuple[type[Any], ...] = tuple(_lenient(cls) for cls in states.state_classes)


def _interpreted(
    inliner: states.Inliner, rawsource: str, text: str, role: str, lineno: int
) -> tuple[list[Any], list[Any]]:
    """Renders unknown roles (``:ref:`x```, ``:py:func:`f```) as text instead of errors."""
    role_fn, messages = roles.role(role, inliner.language, lineno, inliner.reporter)
    if role_fn:
        return states.Inliner.interpreted(inliner, rawsource, text, role, lineno)  # type: ignore[no-any-return]
    label = utils.unescape(text)
    target = _ROLE_TARGET.match(label)
    if target and target.group("label"):
        label = target.group("label")
    if label.startswith("~"):
        # Sphinx shows only the last component of ``~package.module.name``.
        label = label[1:].rsplit(".", 1)[-1]
    label = label.lstrip("!")
    if role.rsplit(":", 1)[-1] in _PROSE_ROLES:
        return [nodes.Text(label)], messages
    return [nodes.literal(rawsource, label)], messages


class _LenientParser(rst.Parser):  # type: ignore[misc]
    def __init__(self) -> None:
        inliner = states.Inliner()
        # Bound on the instance: docutils builds the inliner's patterns from the attributes of
        # exactly its class, so a subclass of Inliner does not work.
        inliner.interpreted = types.MethodType(_interpreted, inliner)
        super().__init__(inliner=inliner)
        self.state_classes = _STATE_CLASSES


def parse_rst(text: str) -> ParsedDocument:
    """Parse reStructuredText into sections.

    Args:
        text: the decoded document.

    Returns:
        The document: title from the first section heading (None without one), one section per
        docutils section, Sphinx object description or bold pseudo-heading, with Markdown-like text.

    Raises:
        ParseError: a line is longer than :data:`MAX_LINE_LENGTH` or nesting is too deep to parse.

    Example:
        >>> parse_rst("**To list buckets**\\n\\nRun::\\n\\n    aws s3 ls\\n").sections[0].path
        ('To list buckets',)
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line) > MAX_LINE_LENGTH:
            raise ParseError(f"line {number} is longer than {MAX_LINE_LENGTH} characters")
    document = _parse_doctree(text)
    metadata = _file_wide_metadata(document)
    sections: list[Section] = []
    try:
        _collect(document, (), "section", sections)
    except RecursionError as exc:
        raise ParseError("reStructuredText nested too deeply to render") from exc
    title = next((child for child in document.children if isinstance(child, nodes.section)), None)
    return ParsedDocument(
        title=_title_of(title) if title is not None else None, sections=sections, metadata=metadata
    )


def _file_wide_metadata(document: nodes.document) -> dict[str, Any]:
    """Take a field list opening the document (``:orphan:``, ``:tocdepth: 2``) out as metadata.

    Sphinx reads such a list as file-wide metadata rather than content, like Markdown front matter.
    """
    first = next((c for c in document.children if not isinstance(c, (nodes.comment, nodes.target))), None)
    if not isinstance(first, nodes.field_list):
        return {}
    metadata: dict[str, Any] = {}
    for field in first.children:
        name, body = field.children[0], field.children[1] if len(field.children) > 1 else None
        metadata[_squash(name.astext())] = _squash(body.astext()) if body is not None else ""
    document.remove(first)
    return metadata


def _parse_doctree(text: str) -> nodes.document:
    parser = _LenientParser()
    if hasattr(frontend, "get_default_settings"):
        settings = frontend.get_default_settings(rst.Parser)
    else:  # docutils < 0.19
        settings = frontend.OptionParser(components=(rst.Parser,)).get_default_values()
    # Nothing may be read from disk or the network, and no message may be printed or abort parsing:
    # Sphinx sources are full of markup plain docutils reports as errors.
    settings.report_level = 5
    settings.halt_level = 5
    settings.warning_stream = False
    settings.file_insertion_enabled = False
    settings.raw_enabled = False
    settings.syntax_highlight = "none"
    # Our own check in parse_rst applies; docutils measures after expanding tabs to 8 spaces.
    settings.line_length_limit = MAX_LINE_LENGTH * 8 + 1
    document = utils.new_document("<document>", settings)
    try:
        parser.parse(text, document)
    except RecursionError as exc:
        raise ParseError("reStructuredText nested too deeply to parse") from exc
    return document


def _title_of(section: nodes.Element) -> str:
    title = next((child for child in section.children if isinstance(child, nodes.title)), None)
    return _squash(title.astext()) if title is not None else ""


def _pseudo_heading(node: nodes.Node) -> str | None:
    """The title if ``node`` is a paragraph made only of one bold phrase, else None."""
    if not isinstance(node, nodes.paragraph):
        return None
    meaningful = [
        child for child in node.children if not (isinstance(child, nodes.Text) and not child.strip())
    ]
    if len(meaningful) == 1 and isinstance(meaningful[0], nodes.strong):
        title = _squash(meaningful[0].astext())
        return title or None
    return None


def _collect(node: nodes.Element, path: tuple[str, ...], entity_type: str, out: list[Section]) -> None:
    """Append the sections found in ``node`` (document, section or object description) to ``out``."""
    current_path, current_type = path, entity_type
    blocks: list[str] = []

    def flush() -> None:
        text = "\n\n".join(block for block in blocks if block.strip())
        if text.strip() or current_path != path:
            out.append(Section(path=current_path, text=text, entity_type=current_type))
        blocks.clear()

    for child in node.children:
        if isinstance(child, nodes.title):
            continue
        if isinstance(child, nodes.section):
            flush()
            current_path, current_type = path, entity_type
            _collect(child, (*path, _title_of(child)), "section", out)
        elif isinstance(child, _ObjectDescription):
            flush()
            current_path, current_type = path, entity_type
            _collect(child, (*path, _squash(child["signature"])), child["objtype"], out)
        elif (heading := _pseudo_heading(child)) is not None:
            flush()
            current_path, current_type = (*path, heading), "section"
        else:
            rendered = _render_block(child, 0)
            if rendered:
                blocks.append(rendered)
    flush()


def _render_blocks(children: Iterable[nodes.Node], depth: int) -> str:
    return "\n\n".join(rendered for child in children if (rendered := _render_block(child, depth)))


def _render_block(node: nodes.Node, depth: int) -> str:
    """Markdown-like text for one body element (empty for elements that carry no content)."""
    if isinstance(node, (nodes.comment, nodes.target, nodes.substitution_definition, nodes.system_message)):
        return ""
    if isinstance(node, (nodes.pending, nodes.raw, nodes.transition, nodes.Invisible)):
        return ""
    if isinstance(node, (nodes.literal_block, nodes.doctest_block)):
        classes = [c for c in node.get("classes", []) if c != "code"]
        return fence(node.astext(), classes[0] if classes else "")
    if isinstance(node, nodes.bullet_list):
        return _render_list(node, lambda _: "- ", depth)
    if isinstance(node, nodes.enumerated_list):
        start = int(node.get("start", 1))
        return _render_list(node, lambda index: f"{start + index}. ", depth)
    if isinstance(node, nodes.definition_list):
        return "\n\n".join(_render_definition(item, depth) for item in node.children)
    if isinstance(node, nodes.field_list):
        return "\n".join(_render_field(field, depth) for field in node.children)
    if isinstance(node, nodes.option_list):
        return "\n".join(_render_option(item, depth) for item in node.children)
    if isinstance(node, nodes.table):
        return _render_table(node)
    if isinstance(node, nodes.line_block):
        return "\n".join(_squash(line.astext()) for line in node.traverse(nodes.line))
    if isinstance(node, nodes.Admonition):
        label = node.tagname.replace("_", " ").capitalize()
        title = next((c for c in node.children if isinstance(c, nodes.title)), None)
        if title is not None:
            label = _squash(title.astext())
        body = _render_blocks((c for c in node.children if not isinstance(c, nodes.title)), depth)
        return f"{label}: {body}" if body else ""
    if isinstance(node, _ObjectDescription):
        # Only reached when nested in other markup (a note, an ``only`` block): inline it.
        body = _render_blocks(node.children, depth + 1)
        return f"{code_span(_squash(node['signature']))}\n\n{body}".strip()
    if isinstance(node, nodes.image):
        return _squash(str(node.get("alt", "")))
    if isinstance(node, nodes.TextElement):
        return _render_inline(node)
    if isinstance(node, nodes.Element):
        return _render_blocks(node.children, depth + 1)
    return _squash(node.astext())


def _render_list(node: nodes.Element, marker: Callable[[int], str], depth: int) -> str:
    items = []
    for index, item in enumerate(node.children):
        prefix = marker(index)
        body = _render_blocks(item.children, depth + 1)
        items.append(prefix + _indent(body, " " * len(prefix)).lstrip(" "))
    return "\n".join(items)


def _render_definition(item: nodes.Node, depth: int) -> str:
    terms = [_render_inline(c) for c in item.children if isinstance(c, (nodes.term, nodes.classifier))]
    definition = next((c for c in item.children if isinstance(c, nodes.definition)), None)
    body = _render_blocks(definition.children, depth + 1) if definition is not None else ""
    return " : ".join(terms) + ("\n" + _indent(body, "  ") if body else "")


def _render_field(field: nodes.Node, depth: int) -> str:
    name = next((c for c in field.children if isinstance(c, nodes.field_name)), None)
    body = next((c for c in field.children if isinstance(c, nodes.field_body)), None)
    rendered = _render_blocks(body.children, depth + 1) if body is not None else ""
    label = _squash(name.astext()) if name is not None else ""
    return f":{label}: {_indent(rendered, '  ').lstrip()}".rstrip()


def _render_option(item: nodes.Node, depth: int) -> str:
    group = next((c for c in item.children if isinstance(c, nodes.option_group)), None)
    description = next((c for c in item.children if isinstance(c, nodes.description)), None)
    options = _squash(group.astext()) if group is not None else ""
    body = _render_blocks(description.children, depth + 1) if description is not None else ""
    return f"{options}  {_indent(body, '  ').lstrip()}".rstrip()


def _render_table(node: nodes.Element) -> str:
    rows = []
    for row in node.traverse(nodes.row):
        cells = [_squash(entry.astext()) for entry in row.children if isinstance(entry, nodes.entry)]
        rows.append(" | ".join(cells))
    return "\n".join(rows)


def _render_inline(node: nodes.Element) -> str:
    parts: list[str] = []
    for child in node.children:
        if isinstance(child, nodes.Text):
            parts.append(str(child))
        elif isinstance(child, (nodes.literal, nodes.title_reference)):
            parts.append(code_span(child.astext()))
        elif isinstance(child, nodes.strong):
            parts.append(f"**{_render_inline(child)}**")
        elif isinstance(child, nodes.emphasis):
            parts.append(f"*{_render_inline(child)}*")
        elif isinstance(child, nodes.footnote_reference):
            parts.append(f"[{child.astext()}]")
        elif isinstance(child, (nodes.target, nodes.system_message, nodes.substitution_definition)):
            continue
        elif isinstance(child, nodes.Element):
            parts.append(_render_inline(child))
        else:
            parts.append(child.astext())
    return "".join(parts).strip()


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


def _squash(text: str) -> str:
    return " ".join(text.split())
