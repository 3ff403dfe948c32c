"""A tool's documented commands by subcommand path: which subcommands exist and what each accepts.

Built from the pages of a CLI-help walk (one page per command, the tool's own page at path ``()``),
it answers what an edit of a command line needs: is this path documented, which commands sit below
it, which documented path does a command line start with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from librarian.correction.helpdocs import CommandDoc, command_doc

__all__ = ["CommandTree"]


class CommandTree:
    """A tool's documented commands by subcommand path (``()`` is the tool itself).

    Example:
        >>> tree = CommandTree([])
        >>> tree.command(("sub",)) is None, tree.paths()
        (True, [])
    """

    def __init__(self, docs: Iterable[CommandDoc]) -> None:
        self._by_path: dict[tuple[str, ...], CommandDoc] = {}
        for doc in docs:
            self._by_path.setdefault(doc.path, doc)

    @classmethod
    def from_snippets(cls, snippets: Iterable[Mapping[str, Any]]) -> CommandTree:
        """The commands that snippets (or pages as snippets) document; the others are skipped."""
        return cls(doc for snippet in snippets if (doc := command_doc(snippet)) is not None)

    def command(self, path: Sequence[str]) -> CommandDoc | None:
        """The command documented at ``path``, or ``None``."""
        return self._by_path.get(tuple(path))

    def paths(self) -> list[tuple[str, ...]]:
        """Every documented path, shortest first."""
        return sorted(self._by_path, key=lambda p: (len(p), p))

    def children(self, path: Sequence[str]) -> list[CommandDoc]:
        """The commands one word below ``path``."""
        prefix = tuple(path)
        return [
            doc
            for p, doc in sorted(self._by_path.items())
            if len(p) == len(prefix) + 1 and p[: len(prefix)] == prefix
        ]

    def longest_prefix(self, words: Sequence[str]) -> tuple[str, ...]:
        """The longest documented path that ``words`` start with (``()`` when none)."""
        best: tuple[str, ...] = ()
        for path in self._by_path:
            if len(path) > len(best) and tuple(words[: len(path)]) == path:
                best = path
        return best

    def __len__(self) -> int:
        return len(self._by_path)

    def __bool__(self) -> bool:
        return bool(self._by_path)
