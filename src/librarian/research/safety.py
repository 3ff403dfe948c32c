"""Documentation is untrusted input: flag text that addresses the reader (an agent) with orders.

A snippet is returned with its flags rather than dropped, so the agent (or its human) can decide;
what matters is that instructions hidden in docs are never passed on silently.

The rules are measured on a labelled set of injections and look-alike documentation
(``bench/injection.py``, ``bench/data/injection_cases.yaml``; figures in ``docs/benchmarks.md``). They
separate orders from descriptions by form: an order to an AI reader names it as such, starts a
sentence, opens a chat turn, or asks to keep something from the user; documentation describes what a
tool does ("the CLI sends your credentials to the STS endpoint", "the kubelet agent must be running").
"""

from __future__ import annotations

import re

# Who an injection addresses: AI readers named as such. "agent" and "assistant" alone are not enough
# (the kubelet agent, the ssh agent, a setup assistant are ordinary subjects of documentation).
_AI_READER = (
    r"(?:ai|llm|large language model|language model|ai model|ai agent|ai coding assistant|"
    r"coding assistant|ai assistant|chatbot)s?"
)
# What an exfiltration order asks for: credentials and the files that hold them.
_SENSITIVE = (
    r"(?:credentials?|secrets?|tokens?|api[ _-]?keys?|passwords?|private keys?|ssh keys?|id_rsa|"
    r"~/\.ssh|\.aws/credentials|\.netrc|\.env\b|kubeconfig|session cookies?|cookies|"
    r"environment variables?|secret access keys?|/etc/passwd|/etc/shadow)"
)
# Where it sends them: an address of the attacker's, never "the server" a tool talks to.
_DESTINATION = (
    r"(?:https?://|\b\d{1,3}(?:\.\d{1,3}){3}\b|[\w.+-]+@[\w-]+\.[\w.]+|webhook|paste|commit message|"
    r"api call|the url)"
)
# An order starts a sentence (or follows "please", "then", a colon or a comma), which tells
# "send the token to https://..." from "the CLI sends your credentials to the STS endpoint".
_ORDER = r"(?:^|[.:;!?,\n]\s*|\b(?:please|then|and|now|you to)\s+)"
# Files that hold credentials, named by path.
_SECRET_FILE = r"(?:~/\.aws/credentials|\.aws/credentials|~/\.ssh/\S*|id_rsa|id_ed25519|\.netrc|/etc/shadow)"

_PATTERNS: dict[str, re.Pattern[str]] = {
    "override_instructions": re.compile(
        r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}"
        r"\b(instructions?|directions?|guidance|guidelines|prompts?|what you were told|"
        r"(everything|all) you (were|have been) told|your rules|the rules above|safety)\b|"
        r"\b(system override|new (directives|instructions|rules) (follow|below|apply)|"
        r"no longer (bound|restricted) by)\b",
        re.IGNORECASE,
    ),
    "role_reassignment": re.compile(
        r"\b(you are now|you're now|pretend (to be|you are)|from now on,? you\b|"
        r"(enter|switch to|in) (developer|god|jailbreak|dan) mode|answer as dan\b)",
        re.IGNORECASE,
    ),
    "addresses_the_agent": re.compile(
        rf"\b(note|message|attention|instructions?|hidden instructions?|notice)\s*(to|for)?\s*(all\s+)?"
        rf"{_AI_READER}\b|"
        rf"\b(if|when) (you are|you're) an? {_AI_READER}\b|"
        rf"\b{_AI_READER}\b[^.\n]{{0,40}}\b(must|should|need to|will)\b(?!\s+be\b)|"
        rf"\b{_AI_READER}\b[^.\n]{{0,40}}\b(is|are) instructed to\b|"
        r"\b(agents?|assistants?|models?) (reading|processing|parsing|summari[sz]ing) (this|these)\b|"
        r"\b(dear|hey|hi|hello)\s+(assistant|model|ai|llm|agent|chatbot)\b|"
        r"\b(reads?|reading|processes|processing) (this|it) as an? (ai|llm|model|language model)\b|"
        rf"\b(important|note|attention|p\.?s\.?)\b[^.\n]{{0,12}}\b(for|to)\b[^.\n]{{0,12}}{_AI_READER}\b",
        re.IGNORECASE,
    ),
    # Keeping something from the person the agent works for is never documentation's business.
    "hidden_from_user": re.compile(
        r"\b(do not|don't|never)\s+(tell|inform|mention|reveal|disclose|show)\b[^.\n]{0,30}"
        r"\b(the )?(user|human|operator|developer)\b|"
        r"\b(never|do not|don't)\s+(mention|reveal|disclose)\s+(this|these)\s+"
        r"(note|section|instructions?|message|text)\b|"
        r"\bkeep (this|it) (between us|secret from|hidden from)\b|\bwithout telling the (user|human)\b|"
        r"\bwithout (mentioning|saying|explaining) (why|this|it)\b",
        re.IGNORECASE,
    ),
    # "Run this command" is ordinary in docs written for people; it becomes an order to an agent
    # when it asks for no confirmation, or is to be done silently.
    "unconfirmed_command": re.compile(
        r"\b(run|execute)\b[^.\n]{0,40}\b(without (asking|confirm\w*|telling)|"
        r"before (answering|responding|replying))\b|"
        r"\b(immediately|silently|secretly|quietly) (run|execute|add|delete|remove|push|append)\b",
        re.IGNORECASE,
    ),
    "pipe_to_shell": re.compile(r"\b(curl|wget)\b[^\n|]{0,200}\|\s*(sudo\s+)?(ba|z)?sh\b", re.IGNORECASE),
    "exfiltration": re.compile(
        rf"{_SECRET_FILE}[^.\n]{{0,60}}\b(your|the) (reply|answer|response)\b|"
        rf"{_ORDER}(send|post|upload|copy|forward|transmit|include|e-?mail)\b[^\n]{{0,60}}{_SENSITIVE}"
        rf"[^\n]{{0,80}}{_DESTINATION}|"
        rf"\b(exfiltrate|leak)\b[^.\n]{{0,60}}{_SENSITIVE}",
        re.IGNORECASE | re.MULTILINE,
    ),
    # The markers chat models are trained on, followed by a role: text that opens a turn of its own.
    "chat_template": re.compile(
        r"<\|(im_start|start_header_id)\|>\s*(system|user|assistant)\b|<\|(system|user|assistant)\|>|"
        r"\[INST\]\s*\S[^\n]{5,}\[/INST\]|<<SYS>>\s*\S|^#{2,3}\s*(system|instruction)\s*:|"
        r"<\s*/?\s*system\s*>|\[system\]\(#",
        re.IGNORECASE | re.MULTILINE,
    ),
    "system_prompt": re.compile(
        r"\b(reveal|print|show|repeat|output|leak|disclose|tell me)\b[^.\n]{0,30}\b(your|the)\b[^.\n]{0,15}"
        r"\b(system prompt|hidden (configuration|instructions|prompt)|initial instructions)\b",
        re.IGNORECASE,
    ),
}

# How much each kind of source is trusted: text generated by the installed tool itself is the most
# reliable description of that tool; web pages are the least.
TRUST_BY_SOURCE_KIND = {
    "cli-help": "tool",
    "python-package": "tool",
    "openapi": "specification",
    "local": "document",
    "git": "document",
    "web": "web",
}


def injection_flags(text: str) -> list[str]:
    """Names of the instruction patterns found in ``text`` (empty when it reads as plain docs)."""
    return [name for name, pattern in _PATTERNS.items() if pattern.search(text)]


def trust_level(source_kind: str | None) -> str:
    """The trust level of a chunk from a source of ``source_kind``."""
    return TRUST_BY_SOURCE_KIND.get(source_kind or "", "unknown")
