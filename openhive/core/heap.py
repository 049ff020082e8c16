"""Keeping a process's long-lived objects out of the cyclic garbage collector's full passes.

A full (generation 2) collection visits every object the collector tracks. A process that has
loaded Django, its apps and litellm tracks about 390,000 objects that live as long as it does
(modules, classes, functions, litellm's tables). Walking them took 280-350 ms in the web
process during a 500-socket burst, four times in a two-second run, and every ack pending
meanwhile waited: the burst's slowest acks were those pauses. `gc.freeze()` moves the objects
alive now to a permanent generation that collections skip; reference counting still frees
them, and what the process creates later is collected as before."""

from __future__ import annotations

import gc


def freeze_long_lived() -> None:
    """Call once the process has loaded what it keeps: after start-up, after a big import."""
    gc.freeze()
