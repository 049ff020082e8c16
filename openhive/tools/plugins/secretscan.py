"""The secret scan of a plugin's source: a live secret value (the vault's, the provider keys),
a well-known key format, or a long high-entropy string literal refuses the registration. A
plugin reads what it needs at run time from its arguments, never from its own text: source
files are stored, shown in the admin and read back by the model.

Findings name the line and the kind of secret, never the value."""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Iterable

from .scan import SECRET_DETECTED, Finding

# Formats that are secrets whatever their context.
KEY_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("an OpenAI/Anthropic-style API key", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}")),
    ("a GitHub token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}")),
    ("a GitHub token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a Stripe key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.")),
    ("credentials in a URL", re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]{3,}@")),
)

# A literal is "token-like" when it is one long run of key characters; it is a likely secret
# when its characters are also nearly random (Shannon entropy per character).
_TOKEN = re.compile(r"^[A-Za-z0-9+/=_\-.~]{20,}$")
_HEX = re.compile(r"^[0-9a-fA-F]{32,}$")
MIN_TOKEN_ENTROPY = 4.0
MIN_HEX_ENTROPY = 3.0


def scan_secrets(source: str, *, known: Iterable[str] = ()) -> list[Finding]:
    findings: list[Finding] = []
    lines = source.splitlines()
    known_values = [value for value in known if value]
    for number, line in enumerate(lines, start=1):
        if any(value in line for value in known_values):
            findings.append(
                Finding(
                    SECRET_DETECTED,
                    number,
                    "a secret value from the vault or a provider profile is written in the "
                    "source; pass it as an argument instead",
                )
            )
            continue
        for kind, pattern in KEY_FORMATS:
            if pattern.search(line):
                findings.append(
                    Finding(SECRET_DETECTED, number, f"{kind} is written in the source")
                )
                break
    flagged = {f.line for f in findings}
    for line, text in _string_literals(source):
        if line not in flagged and looks_random(text):
            flagged.add(line)
            findings.append(
                Finding(
                    SECRET_DETECTED,
                    line,
                    "a long high-entropy string literal looks like a key or a token; pass "
                    "secrets as arguments instead of writing them in the source",
                )
            )
    return sorted(findings, key=lambda f: f.line)


def looks_random(text: str) -> bool:
    if _HEX.match(text):
        return entropy(text) >= MIN_HEX_ENTROPY
    if not _TOKEN.match(text):
        return False
    has_digit = any(c.isdigit() for c in text)
    has_upper = any(c.isupper() for c in text)
    has_lower = any(c.islower() for c in text)
    # Identifiers, words and dotted names are not keys: a key mixes classes of characters.
    return has_digit and has_upper and has_lower and entropy(text) >= MIN_TOKEN_ENTROPY


def entropy(text: str) -> float:
    counts = Counter(text)
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def _string_literals(source: str) -> list[tuple[int, str]]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            # A literal spread over lines (a docstring) is split into its words.
            for offset, line_text in enumerate(node.value.splitlines() or [""]):
                for word in line_text.split():
                    found.append((node.lineno + offset, word.strip("\"'`,;()[]{}")))
    return found
