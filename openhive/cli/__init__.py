from .base import Verb
from .demo import Demo
from .ops import Delegate, Spawn, Status, Tool
from .replay import Replay
from .serve import Engine, Serve
from .setup import Init, Token
from .vault import Reembed, RotateVaultKey
from .worker import Worker

VERBS: dict[str, Verb] = {
    "serve": Serve(),
    "engine": Engine(),
    "init": Init(),
    "demo": Demo(),
    "tool": Tool(),
    "spawn": Spawn(),
    "delegate": Delegate(),
    "status": Status(),
    "token": Token(),
    "rotate-vault-key": RotateVaultKey(),
    "reembed": Reembed(),
    "worker": Worker(),
    "replay": Replay(),
}
