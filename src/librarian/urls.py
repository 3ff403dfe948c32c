"""URL helpers shared by the modules that show a configured URL (errors, stats, logs)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def without_password(url: str) -> str:
    """``url`` with any password in its user-info replaced by ``***``.

    Example:
        >>> without_password("postgresql://me:secret@db:5432/x")
        'postgresql://me:***@db:5432/x'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
