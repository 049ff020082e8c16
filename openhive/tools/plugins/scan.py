"""The static checks of a plugin's source, before anything of it runs: an AST scan for
forbidden constructs (code execution, dynamic import, processes, the network, native code,
unpickling, games with builtins and dunders, the environment, paths outside the workspace).

The scan is a first line that gives the team a precise, early refusal (a code and a line);
it is not the guarantee. A determined author can hide intent from any static check, which is
why every call runs in the sandbox (no network, the workspace as the only writable place, no
secrets in the environment, limits and a timeout)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

FORBIDDEN_PATTERN = "FORBIDDEN_PATTERN"
SECRET_DETECTED = "SECRET_DETECTED"
RESERVED_NAME = "RESERVED_NAME"
INVALID_INTERFACE = "INVALID_INTERFACE"


@dataclass(frozen=True)
class Finding:
    code: str
    line: int
    message: str

    def as_dict(self) -> dict:
        return {"code": self.code, "line": self.line, "message": self.message}


# Modules a plugin may not import at all (root name → why).
FORBIDDEN_MODULES: dict[str, str] = {
    **dict.fromkeys(
        ("subprocess", "pty", "multiprocessing", "concurrent", "asyncio"),
        "starts processes",
    ),
    **dict.fromkeys(
        (
            "socket",
            "ssl",
            "select",
            "selectors",
            "http",
            "ftplib",
            "smtplib",
            "poplib",
            "imaplib",
            "telnetlib",
            "nntplib",
            "xmlrpc",
            "socketserver",
            "requests",
            "httpx",
            "aiohttp",
            "urllib3",
            "websocket",
            "websockets",
            "paramiko",
        ),
        "opens network connections (plugins have no network; web_fetch is the way out)",
    ),
    **dict.fromkeys(("ctypes", "cffi", "mmap"), "reaches native code or raw memory"),
    **dict.fromkeys(
        ("webbrowser", "ensurepip", "venv", "pip", "pdb", "bdb"),
        "starts programs or debuggers",
    ),
    **dict.fromkeys(("pickle", "cPickle", "_pickle", "marshal", "shelve", "dill"), "unpickles"),
    **dict.fromkeys(
        ("importlib", "imp", "pkgutil", "runpy", "zipimport", "code", "codeop"),
        "imports or compiles code dynamically",
    ),
    **dict.fromkeys(
        ("builtins", "__builtin__", "inspect", "gc", "types", "sysconfig"),
        "plays games with the interpreter's internals",
    ),
}
# `urllib` is fine for parsing; only its client is forbidden.
FORBIDDEN_SUBMODULES = {"urllib.request": "opens network connections"}

# Built-in functions a plugin may not call or even name.
FORBIDDEN_BUILTINS: dict[str, str] = {
    "eval": "evaluates code",
    "exec": "executes code",
    "compile": "compiles code",
    "__import__": "imports dynamically",
    "breakpoint": "starts a debugger",
    "globals": "reaches the module's globals",
    "locals": "reaches a frame's locals",
    "vars": "reaches an object's namespace",
}

# Names of the `os` (and `sys`, `shutil`) modules that are refused, whatever the alias.
_OS_PROCESS = (
    "system",
    "popen",
    "fork",
    "forkpty",
    "kill",
    "killpg",
    "abort",
    "execl",
    "execle",
    "execlp",
    "execlpe",
    "execv",
    "execve",
    "execvp",
    "execvpe",
    "spawnl",
    "spawnle",
    "spawnlp",
    "spawnlpe",
    "spawnv",
    "spawnve",
    "spawnvp",
    "spawnvpe",
    "posix_spawn",
    "posix_spawnp",
    "setuid",
    "setgid",
    "seteuid",
    "setegid",
    "setsid",
    "chroot",
    "chdir",
    "fchdir",
    "add_dll_directory",
    "startfile",
)
_OS_ENV = ["environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"]
FORBIDDEN_ATTRIBUTES: dict[str, str] = {
    **{f"os.{name}": "starts or controls processes" for name in _OS_PROCESS},
    **{f"os.{name}": "reads the environment" for name in _OS_ENV},
    **{f"posix.{name}": "reaches the os module's internals" for name in ("system", "environ")},
    "os.path.expanduser": "reaches the home folder, outside the workspace",
    **{
        f"sys.{name}": "plays games with the interpreter's internals"
        for name in (
            "modules",
            "meta_path",
            "path_hooks",
            "path_importer_cache",
            "settrace",
            "setprofile",
            "addaudithook",
            "_getframe",
            "exc_info",
            "breakpointhook",
        )
    },
    "shutil.chown": "changes ownership",
}
# Modules named `posix`/`nt` are the os module under another name.
FORBIDDEN_MODULES.update(dict.fromkeys(("posix", "nt"), "reaches the os module's internals"))

# Dunder attributes that are ordinary object protocol, not escape hatches.
ALLOWED_DUNDERS = frozenset(
    {
        "__init__",
        "__name__",
        "__doc__",
        "__file__",
        "__all__",
        "__slots__",
        "__version__",
        "__post_init__",
        "__enter__",
        "__exit__",
        "__iter__",
        "__next__",
        "__len__",
        "__str__",
        "__repr__",
        "__eq__",
        "__hash__",
        "__lt__",
        "__contains__",
        "__getitem__",
    }
)
# `"{0.__class__}".format(x)` walks attributes without an attribute node.
_FORMAT_DUNDER = re.compile(r"\{[^{}]*__\w+__[^{}]*\}")
ALLOWED_DUNDER_STRINGS = ALLOWED_DUNDERS | {"__main__"}
_ATTRIBUTE_BUILTINS = ("getattr", "setattr", "delattr", "hasattr")

# Functions whose first argument is a path: a literal one must stay inside the workspace.
_PATH_FUNCTIONS = frozenset(
    {
        "open",
        "io.open",
        "Path",
        "pathlib.Path",
        "PurePath",
        "pathlib.PurePath",
        "os.open",
        "os.listdir",
        "os.scandir",
        "os.stat",
        "os.lstat",
        "os.remove",
        "os.unlink",
        "os.rmdir",
        "os.mkdir",
        "os.makedirs",
        "os.rename",
        "os.replace",
        "os.symlink",
        "os.link",
        "os.readlink",
        "os.walk",
        "os.chmod",
        "glob.glob",
        "glob.iglob",
        "shutil.copy",
        "shutil.copy2",
        "shutil.copyfile",
        "shutil.copytree",
        "shutil.move",
        "shutil.rmtree",
    }
)


def scan_source(source: str) -> list[Finding]:
    """Every forbidden construct in `source`, in line order. A source that does not parse is
    one INVALID_INTERFACE finding at the line of the syntax error."""
    try:
        tree = ast.parse(source, filename="plugin.py")
    except SyntaxError as exc:
        return [
            Finding(INVALID_INTERFACE, exc.lineno or 1, f"the module does not parse: {exc.msg}")
        ]
    except (ValueError, RecursionError) as exc:
        return [Finding(INVALID_INTERFACE, 1, f"the module does not parse: {exc}")]
    visitor = _Scanner()
    visitor.visit(tree)
    return sorted(set(visitor.findings), key=lambda f: (f.line, f.message))


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        # Local name → the dotted module path it stands for (`import os as o` → o: "os").
        self.aliases: dict[str, str] = {}

    def forbid(self, node: ast.AST, message: str) -> None:
        self.findings.append(Finding(FORBIDDEN_PATTERN, getattr(node, "lineno", 1), message))

    # --- imports ------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.forbid(node, "relative import: a plugin is one module and imports the stdlib")
            return
        module = node.module or ""
        self._check_module(node, module)
        for alias in node.names:
            if alias.name == "*":
                self.forbid(node, f"`from {module} import *` hides what is used; name imports")
                continue
            dotted = f"{module}.{alias.name}"
            self._check_module(node, dotted, submodule_only=True)
            self._check_dotted(node, dotted)
            self.aliases[alias.asname or alias.name] = dotted

    def _check_module(self, node: ast.AST, name: str, *, submodule_only: bool = False) -> None:
        root = name.split(".")[0]
        if not submodule_only and root in FORBIDDEN_MODULES:
            self.forbid(node, f"import of `{root}`, which {FORBIDDEN_MODULES[root]}")
        for forbidden, why in FORBIDDEN_SUBMODULES.items():
            if name == forbidden or name.startswith(forbidden + "."):
                self.forbid(node, f"import of `{forbidden}`, which {why}")

    # --- names and attributes -----------------------------------------------------------------

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in FORBIDDEN_BUILTINS and name not in self.aliases:
            self.forbid(node, f"`{name}` {FORBIDDEN_BUILTINS[name]}")
        elif _is_dunder(name) and name not in ALLOWED_DUNDERS:
            self.forbid(node, f"the dunder name `{name}`")
        self._check_dotted(node, self.aliases.get(name, ""))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _is_dunder(node.attr) and node.attr not in ALLOWED_DUNDERS:
            self.forbid(node, f"the dunder attribute `.{node.attr}`")
        dotted = self._dotted(node)
        if dotted:
            self._check_dotted(node, dotted)
        self.generic_visit(node)

    def _dotted(self, node: ast.AST) -> str:
        """`os.path.join` as the module path it names, through import aliases; "" otherwise."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return ""
        return ".".join([self.aliases[node.id], *reversed(parts)])

    def _check_dotted(self, node: ast.AST, dotted: str) -> None:
        if dotted in FORBIDDEN_ATTRIBUTES:
            self.forbid(node, f"`{dotted}` {FORBIDDEN_ATTRIBUTES[dotted]}")
        elif dotted.startswith(("os.exec", "os.spawn", "os.posix_spawn")):
            self.forbid(node, f"`{dotted}` starts processes")

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        if _FORMAT_DUNDER.search(node.value):
            self.forbid(node, "a format string that reaches a dunder attribute")
        elif _is_dunder(node.value) and node.value not in ALLOWED_DUNDER_STRINGS:
            # `operator.attrgetter("__class__")`, `getattr(x, name)` with name = "__globals__"
            self.forbid(node, f"the dunder name {node.value!r} in a string")

    # --- calls --------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else ""
        if name in _ATTRIBUTE_BUILTINS and name not in self.aliases:
            self._check_attribute_call(node, name)
        dotted = self._dotted(func) if isinstance(func, ast.Attribute) else name
        if isinstance(func, ast.Name) and name in self.aliases:
            dotted = self.aliases[name]
        if dotted in _PATH_FUNCTIONS and node.args:
            self._check_path_literal(node, node.args[0])
        self.generic_visit(node)

    def _check_attribute_call(self, node: ast.Call, name: str) -> None:
        target = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(target, ast.Constant) and isinstance(target.value, str)):
            self.forbid(node, f"`{name}` with a computed attribute name hides what is reached")
        elif _is_dunder(target.value) or target.value.startswith("_"):
            self.forbid(node, f"`{name}` on the private attribute `{target.value}`")
        elif name != "getattr" and name != "hasattr":
            subject = node.args[0]
            if isinstance(subject, ast.Name) and subject.id in self.aliases:
                self.forbid(node, f"`{name}` on the module `{subject.id}` rewrites it")

    def _check_path_literal(self, node: ast.Call, arg: ast.expr) -> None:
        text = _literal_text(arg)
        if text is None:
            return
        parts = text.replace("\\", "/").split("/")
        if text.startswith(("/", "~")) or ".." in parts:
            self.forbid(
                node,
                f"file access outside the workspace ({text[:80]!r}); use paths relative to "
                "the workspace",
            )


def _literal_text(node: ast.expr) -> str | None:
    """The text of a string literal, or of the literal start of an f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")
