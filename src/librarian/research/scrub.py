"""Remove secrets and personal details from error text before it is stored or compared.

Feedback records keep the stderr and the command of a failed run, which routinely carry credentials
(``--password``, ``AWS_SECRET_ACCESS_KEY=...``, a token in a URL) and the user's name (in home
paths and e-mail addresses). :func:`scrub` replaces each with a typed placeholder, so what is stored
still reads as the same error and still normalises to the same signature:

=================================  ==============================================================
covered                            replaced by
=================================  ==============================================================
private key blocks (PEM, OpenSSH,  ``<secret>`` (a block cut short by truncated output is removed
PGP), even unterminated             to the end of the text)
JSON Web Tokens (``eyJ..``)         ``<secret>``
URL user-info ``scheme://u:p@``     ``scheme://<secret>@``
``Authorization:`` headers (any      ``Authorization: Basic <secret>``, ``Bearer <secret>``
scheme), ``Bearer`` tokens with a
digit ("bearer auth failed" stays)
provider tokens with a fixed        ``<secret>``: AWS key ids (``AKIA``, ``ASIA`` and the other
prefix                              four-letter id prefixes), GitHub (``ghp_`` ``gho_`` ``ghu_``
                                    ``ghs_`` ``ghr_`` ``github_pat_``), GitLab (``glpat-``), Slack
                                    (``xox?-`` and webhook URLs), OpenAI/Anthropic-style ``sk-``,
                                    Stripe ``sk_live_``/``rk_``, Google ``AIza``, npm ``npm_``
``--password X``, ``--token=X``     ``--password <secret>``
(a flag whose name is a credential)
``key=value`` / ``key: value`` /    the value becomes ``<secret>``
``"key": "value"`` where the key
names a credential
long random-looking strings         ``<secret>``: 32+ characters of the base64 alphabet mixing
                                    upper case, lower case and digits with a Shannon entropy of at
                                    least 4.2 bits per character (an AWS secret key, a session token)
e-mail addresses                    ``<email>``
home directories                    ``~``: ``/home/NAME``, ``/var/home/NAME``, ``/Users/NAME``,
                                    ``C:\\Users\\NAME``, and the current user's home and ``$HOME``
=================================  ==============================================================

A key or flag names a credential when one of its words (split at ``_ - .`` and camelCase) is a
credential word (password, passwd, pwd, secret, token, credential(s), signature, cookie, auth...)
or two adjacent words make one (api+key, access+key, private+key, session+id, account+key). Names of
a credential rather than its value are kept: a key whose last word is ``id``, ``arn``, ``name``,
``file``, ``path``, ``url``... (``--secret-id prod/db``, ``--token-file``), and error class names
(``ExpiredTokenException: ...``). Ordinary values such as ``--bucket my-bucket`` or
``s3://my-bucket/report.csv`` are left alone.

Not covered: user names outside home paths and e-mail addresses, host names and IP addresses,
secrets shorter than 32 characters in free text (outside a credential key, flag or header), and
secrets split across lines. The placeholders are never matched again, so ``scrub`` is idempotent.

Considered: ``detect-secrets`` (Yelp) finds secrets line by line for pre-commit scanning, but it is
not a dependency of this project, reports findings rather than redacting text, and is tuned for
files rather than for one stderr; this table covers the same provider formats in about a page.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

SECRET = "<secret>"
EMAIL = "<email>"
HOME = "~"

_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@:]*:[^/\s@]*@")
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:(basic|bearer|token|digest|negotiate)\s+)?"
    r"[^\s\"',;]+"
)
# A bearer credential has a digit somewhere; "bearer authentication failed" is prose.
_BEARER = re.compile(r"(?i)\b(bearer)\s+(?!<secret>)(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}")
# Fixed-prefix tokens of well-known providers: the prefix makes them unambiguous anywhere in text.
_PROVIDER_TOKENS = re.compile(
    r"\b(?:"
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA|APKA)[A-Z0-9]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abposre]-[A-Za-z0-9-]{10,}"
    r"|sk-(?:proj-|ant-|live-)?[A-Za-z0-9_-]{20,}"
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|npm_[A-Za-z0-9]{36}"
    r")\b"
    r"|https://hooks\.slack\.com/services/[A-Za-z0-9/]+"
)
# The value never starts with "-": "--verbose --password x" must reach "--password".
_FLAG = re.compile(
    r"(?<![\w-])(?P<flag>--?[A-Za-z][\w-]*)(?:=|\s+)(?!-)(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"']+)"
)
_ASSIGNMENT = re.compile(
    r"(?<![\w-])(?P<key>[A-Za-z_][\w.-]*)(?P<quote>[\"']?)(?P<sep>\s*[=:]\s*)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"',;&]+)"
)
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+=_-][A-Za-z0-9+/=_-]{31,}(?![A-Za-z0-9+/=_-])")
# ``git@host:owner/repo`` is a repository address, not a person.
_EMAIL = re.compile(
    r"(?<![\w.+-])(?!git@)[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
)
_HOME_PATHS = re.compile(
    r"(?<![\w.~-])(?:(?:/var)?/home|/Users|[A-Za-z]:[\\/]+Users)[\\/]+[^\\/\s\"'<>:;,()]+(?=[\\/\s\"'<>:;,()]|$)"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

_CREDENTIAL_WORDS = frozenset(
    {
        "password", "passwd", "passphrase", "pwd", "pass", "secret", "secrets", "token", "tokens",
        "credential", "credentials", "creds", "signature", "sig", "cookie", "auth",
        "apikey", "accesskey", "privatekey", "sessionid", "accountkey", "secretkey", "clientsecret",
    }
)  # fmt: skip
# A last word that makes the key the *name* of a credential, not its value.
_NAME_WORDS = frozenset(
    {
        "id", "ids", "arn", "name", "names", "file", "path", "type", "version", "length", "policy",
        "region", "url", "uri", "endpoint", "expiry", "expiration", "ttl", "count", "format",
        "error", "exception", "warning", "invalid", "expired", "missing", "required", "found",
    }
)  # fmt: skip
_MIN_ENTROPY = 4.2


def _words(key: str) -> list[str]:
    return [w for w in re.split(r"[_.\-\s]+", _CAMEL.sub("_", key).lower()) if w]


def names_credential(key: str) -> bool:
    """Whether ``key`` (an option, variable or field name) holds a credential's value.

    >>> names_credential("AWS_SECRET_ACCESS_KEY"), names_credential("--secret-id")
    (True, False)
    """
    words = _words(key)
    if not words:
        return False
    pairs = {a + b for a, b in itertools.pairwise(words)}
    if words[-1] in _NAME_WORDS and (len(words) < 2 or words[-2] + words[-1] not in _CREDENTIAL_WORDS):
        return False
    return any(w in _CREDENTIAL_WORDS for w in words) or bool(pairs & _CREDENTIAL_WORDS)


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_random(token: str) -> bool:
    """Whether ``token`` reads as generated key material rather than a word, name or hex digest."""
    return (
        len(token) >= 32
        and any(c.isupper() for c in token)
        and any(c.islower() for c in token)
        and any(c.isdigit() for c in token)
        and _entropy(token) >= _MIN_ENTROPY
    )


def _keep_quotes(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return f"{value[0]}{SECRET}{value[0]}"
    return SECRET


def _redact_values(pattern: re.Pattern[str], key_group: str) -> Callable[[str], str]:
    """A rule that blanks the ``value`` group of ``pattern`` where its key names a credential.

    Matches are searched one at a time rather than with ``re.sub``: in ``Error: password: x`` the
    first candidate (``Error: password``) has a harmless key, and its value must be searched again
    as the key of the next candidate instead of being consumed.
    """

    def redact(text: str) -> str:
        pieces: list[str] = []
        position = 0
        while (match := pattern.search(text, position)) is not None:
            value = match["value"]
            if names_credential(match[key_group]) and SECRET not in value:
                pieces.append(text[position : match.start("value")] + _keep_quotes(value))
                position = match.end("value")
            else:
                pieces.append(text[position : match.start("value")])
                position = match.start("value")
        return "".join(pieces) + text[position:]

    return redact


def _auth_header(match: re.Match[str]) -> str:
    scheme = f"{match.group(2)} " if match.group(2) else ""
    return f"{match.group(1)}{scheme}{SECRET}"


def _long_token(match: re.Match[str]) -> str:
    return SECRET if looks_random(match.group(0)) else match.group(0)


def _home_dirs(extra: Iterable[str]) -> list[str]:
    """The current user's home directories, longest first (read at call time, never cached)."""
    candidates = {os.environ.get("HOME", ""), str(Path.home()), *extra}
    # "/" as a home (some service accounts) would turn every absolute path into "~".
    return sorted((h.rstrip("/\\") for h in candidates if len(h.rstrip("/\\")) > 1), key=len, reverse=True)


def _replace_homes(text: str, homes: Iterable[str]) -> str:
    for home in _home_dirs(homes):
        text = re.sub(rf"(?<![\w.~-]){re.escape(home)}(?=[\\/\s\"'<>:;,()]|$)", HOME, text)
    return _HOME_PATHS.sub(HOME, text)


_Rule = tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]] | Callable[[str], str]

# Order matters: whole blocks and prefixed tokens first, so the generic key=value rule never sees a
# half-replaced credential; e-mails before the long-token rule, which would otherwise eat them.
_RULES: tuple[_Rule, ...] = (
    (_PRIVATE_KEY, SECRET),
    (_JWT, SECRET),
    (_URL_USERINFO, rf"\1{SECRET}@"),
    (_AUTH_HEADER, _auth_header),
    (_BEARER, rf"\1 {SECRET}"),
    (_PROVIDER_TOKENS, SECRET),
    _redact_values(_FLAG, "flag"),
    _redact_values(_ASSIGNMENT, "key"),
    (_EMAIL, EMAIL),
    (_LONG_TOKEN, _long_token),
)


def scrub(text: str, *, homes: Iterable[str] = ()) -> str:
    """``text`` with secrets, e-mail addresses and home directories replaced by placeholders.

    Args:
        text: stderr, a command line or a query.
        homes: more directories to treat as the current user's home (the process's ``$HOME`` and
            :func:`pathlib.Path.home` are always included).

    Returns:
        The scrubbed text; placeholders are ``<secret>``, ``<email>`` and ``~`` (see the module
        docstring for the table of what is covered).

    Example:
        >>> scrub("aws s3 ls --profile x AWS_SECRET_ACCESS_KEY=abc/123 --bucket my-bucket")
        'aws s3 ls --profile x AWS_SECRET_ACCESS_KEY=<secret> --bucket my-bucket'
    """
    for rule in _RULES:
        if callable(rule):
            text = rule(text)
        else:
            pattern, replacement = rule
            text = pattern.sub(replacement, text)
    return _replace_homes(text, homes)


def scrub_optional(text: str | None, *, homes: Iterable[str] = ()) -> str | None:
    """:func:`scrub` for optional fields: ``None`` stays ``None``."""
    return None if text is None else scrub(text, homes=homes)
