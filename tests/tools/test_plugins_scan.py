"""The static checks of a plugin: each forbidden construct is refused with FORBIDDEN_PATTERN and
its line, each secret with SECRET_DETECTED and its line (never its value), and ordinary code
passes. The unit (the scanners) and the door (register_plugin_tool through call_tool)."""

from __future__ import annotations

import textwrap

import pytest

from openhive.core import paths
from openhive.engine.models import ToolCall
from openhive.tools.models import Plugin
from openhive.tools.plugins.scan import scan_source
from openhive.tools.plugins.secretscan import scan_secrets
from vault.services import vault_store_secret

from .plugin_helpers import ADD, call_as, needs_bwrap, plugin, register

# (what, the offending line; it is written as line 2 of the module, after `x = 1`)
FORBIDDEN = [
    ("eval", "y = eval('1+1')"),
    ("exec", "exec('print(1)')"),
    ("compile", "c = compile('1', 'f', 'eval')"),
    ("__import__", "m = __import__('os')"),
    ("importlib", "import importlib"),
    ("importlib from", "from importlib import import_module"),
    ("subprocess", "import subprocess"),
    ("subprocess from", "from subprocess import run as r"),
    ("os.system", "import os; os.system('id')"),
    ("os.popen alias", "import os as o; o.popen('id')"),
    ("os.fork", "import os; os.fork()"),
    ("os.execv", "import os; os.execv('/bin/sh', ['sh'])"),
    ("from os import system", "from os import system"),
    ("pty", "import pty"),
    ("socket", "import socket"),
    ("http.client", "import http.client"),
    ("urllib.request", "import urllib.request"),
    ("urllib.request from", "from urllib.request import urlopen"),
    ("requests", "import requests"),
    ("asyncio", "import asyncio"),
    ("multiprocessing", "import multiprocessing"),
    ("ctypes", "import ctypes"),
    ("pickle", "import pickle"),
    ("marshal", "import marshal"),
    ("builtins", "import builtins"),
    ("__builtins__", "b = __builtins__"),
    ("dunder attribute", "k = ().__class__"),
    ("subclasses", "k = object.__subclasses__()"),
    ("globals", "g = globals()"),
    ("getattr computed", "v = getattr(x, 'sys' + 'tem')"),
    ("getattr dunder", "v = getattr(x, '__class__')"),
    ("setattr module", "import json; setattr(json, 'loads', None)"),
    ("format dunder", "v = '{0.__class__}'.format(x)"),
    ("dunder string", "import operator; g = operator.attrgetter('__globals__')"),
    ("webbrowser", "import webbrowser"),
    ("os.environ", "import os; k = os.environ['KEY']"),
    ("os.getenv", "import os; k = os.getenv('KEY')"),
    ("from os import environ", "from os import environ"),
    ("sys.modules", "import sys; m = sys.modules"),
    ("sys._getframe", "import sys; f = sys._getframe()"),
    ("inspect", "import inspect"),
    ("absolute path", "f = open('/etc/passwd')"),
    ("parent path", "f = open('../other/notes.md', 'w')"),
    ("home path", "from pathlib import Path; p = Path('~/.ssh/id_rsa')"),
    ("f-string absolute", "f = open(f'/proc/{x}/environ')"),
    ("shutil outside", "import shutil; shutil.rmtree('/tmp')"),
    ("relative import", "from . import sibling"),
    ("star import", "from json import *"),
]


@pytest.mark.parametrize(("what", "line"), FORBIDDEN, ids=[w for w, _ in FORBIDDEN])
def test_each_forbidden_construct_is_refused_with_its_line(what, line):
    findings = scan_source(f"x = 1\n{line}\n")
    assert findings, what
    assert all(f.code == "FORBIDDEN_PATTERN" for f in findings)
    assert findings[0].line == 2, findings


HARMLESS = textwrap.dedent(
    '''
    """A harmless plugin: parsing, dates, regexes, files in the workspace."""
    import csv
    import datetime as dt
    import json
    import math
    import os.path
    import re
    import urllib.parse
    from collections import Counter
    from dataclasses import dataclass
    from pathlib import Path

    DESCRIPTION = "Summarise a CSV file of the workspace"
    PARAMETERS = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "CSV path, relative"}},
        "required": ["path"],
    }
    WORD = re.compile(r"[a-z]+")
    SAMPLE_HASH = "d41d8cd98f00b204"  # short hex: not a secret
    URL = "https://example.com/api/v1/items?page=2"


    @dataclass
    class Row:
        name: str

        def __post_init__(self):
            self.name = self.name.strip()


    class Store:
        __slots__ = ("folder",)

        def __init__(self, folder):
            self.folder = Path(folder)

        def __repr__(self):
            return f"Store({self.folder})"


    def run(args):
        path = Path("data") / args["path"]
        rows = list(csv.DictReader(open(path, encoding="utf-8"))) if path.exists() else []
        words = Counter(WORD.findall(json.dumps(rows).lower()))
        out = os.path.join("reports", "summary.json")
        Path("reports").mkdir(exist_ok=True)
        Path(out).write_text(json.dumps({"rows": len(rows)}))
        name = getattr(Row("a"), "name", "")
        return {
            "rows": len(rows),
            "top": words.most_common(3),
            "when": dt.date(2026, 1, 1).isoformat(),
            "root": round(math.sqrt(2), 3),
            "query": urllib.parse.urlencode({"q": name}),
            "file": out,
            "me": Path(__file__).name,
        }


    if __name__ == "__main__":
        print(run({"path": "sample.csv"}))
    '''
).lstrip()


def test_harmless_code_passes_both_scans():
    assert scan_source(HARMLESS) == []
    assert scan_secrets(HARMLESS) == []
    assert scan_source(ADD) == [] and scan_secrets(ADD) == []


SECRETS = [
    ("aws", 'KEY = "AKIAIOSFODNN7EXAMPLE"'),
    ("openai", 'KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"'),
    ("github", 'TOKEN = "ghp_' + "a1B2" * 9 + '"'),
    ("slack", 'TOKEN = "xoxb-123456789012-abcdefghij"'),
    ("private key", 'PEM = "-----BEGIN RSA PRIVATE KEY-----"'),
    ("url credentials", 'DSN = "postgres://admin:hunter2secret@db.internal/app"'),
    ("high entropy", 'TOKEN = "Zq8vN3kLp0XwR7tYb2MhJ5sDf9GcVa1E"'),
    ("hex", 'TOKEN = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"'),
]


@pytest.mark.parametrize(("what", "line"), SECRETS, ids=[w for w, _ in SECRETS])
def test_each_secret_format_is_detected_with_its_line_but_not_its_value(what, line):
    findings = scan_secrets(f"x = 1\n{line}\n")
    assert [(f.code, f.line) for f in findings] == [("SECRET_DETECTED", 2)], (what, findings)
    value = line.split('"')[1]
    assert value not in findings[0].message


def test_a_vault_value_in_the_source_is_a_secret_whatever_its_shape():
    findings = scan_secrets('x = 1\nPASSWORD = "correct horse"\n', known=["correct horse"])
    assert [(f.code, f.line) for f in findings] == [("SECRET_DETECTED", 2)]
    assert "vault" in findings[0].message


@pytest.mark.django_db
@needs_bwrap
def test_the_door_refuses_forbidden_code_and_names_each_line(ops):
    source = plugin("import subprocess\nreturn subprocess.run(['id'])")
    result = register(ops, "shell_out", source)
    assert result["success"] is False and result["code"] == "FORBIDDEN_PATTERN"
    assert result["line"] == 6 and "line 6" in result["error"]
    assert result["findings"][0] == {
        "code": "FORBIDDEN_PATTERN",
        "line": 6,
        "message": result["findings"][0]["message"],
    }
    assert not Plugin.objects.exists()
    summary = register(ops, "summary", HARMLESS)
    assert summary["success"], summary
    workspace = paths.team_dir("ops")
    (workspace / "data").mkdir()
    (workspace / "data" / "sample.csv").write_text("name,state\nalpha,up\nbeta,down\n")
    ran = call_as(ops, "plugin__summary", path="sample.csv")
    assert ran["success"], ran
    assert ran["result"]["rows"] == 2 and ran["result"]["me"] == "summary.py"
    assert (workspace / "reports" / "summary.json").read_text() == '{"rows": 2}'


@pytest.mark.django_db
@needs_bwrap
def test_the_door_refuses_a_vault_secret_and_the_audit_keeps_it_out(ops, vault_key):
    vault_store_secret(team=ops, key="api", value="s3cr3t-value-for-test", updated_by="test")
    source = plugin('token = "s3cr3t-value-for-test"\nreturn token')
    result = register(ops, "leaky", source)
    assert result["success"] is False and result["code"] == "SECRET_DETECTED"
    assert result["line"] == 6 and "s3cr3t" not in result["error"]
    audit = ToolCall.objects.get(tool="register_plugin_tool")
    assert "s3cr3t-value-for-test" not in str(audit.arguments) + str(audit.result)
    assert not Plugin.objects.exists()
