"""The web process `serve` runs: uvicorn, on uvloop with httptools, serving openhive.asgi.

    python -m openhive.webserver HOST PORT [MODULE:APP]

Why uvicorn where the design first named daphne: 500 chat sockets sending at once (the same
client, benchmarks/chat_sockets.py, the same day) were acked at p99 100-171 ms on daphne and
70-86 ms here; a bare echo socket at 80-125 ms on daphne and 55-67 ms here. daphne stays
installed for whoever serves the app with it (openhive.chat.close_reason patches its close
frames when it is loaded).

WebSocket compression (permessage-deflate) is off unless OPENHIVE_WS_COMPRESSION=true: chat
frames are small JSON, and compressing them cost more than it saved. With 500 sockets it held
21 MB of zlib state in the web process (259 MB against 239 MB after 500 sockets and 1,000
messages), and a bare echo socket's burst p99 was 141 ms with it against 114 ms without
(medians of 12 runs each, the same day).

uvicorn's logging is left to Django's (the formats, the scrubbing filter, the levels set in
settings), and its access log is off: it prints query strings, API tokens included, as they
come. openhive.core.accesslog logs each request scrubbed instead."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import environ
import uvicorn
from uvicorn.config import STARTUP_FAILURE

from openhive.core.heap import quiet_start, start_done, start_pause_keeper

# Less than serve's STOP_GRACE_SECONDS: open sockets are closed (1012, going away) and their
# consumers get this long to end before the process exits on its own.
SHUTDOWN_SECONDS = 2


def compression() -> bool:
    """Whether the server offers permessage-deflate to the clients that ask for it."""
    return environ.Env().bool("OPENHIVE_WS_COMPRESSION", default=False)


class WebServer(uvicorn.Server):
    """uvicorn's server, which imports litellm in the background once it listens, when asked
    (`preload_llm`), rather than while the application loads: that import is seconds of CPU,
    and run beside the application's own start it held /api/v1/health back (serve's first
    answer came 0.45 s later, medians of 5 starts, 2-core VM)."""

    def __init__(self, config: uvicorn.Config, *, preload_llm: bool) -> None:
        super().__init__(config)
        self.preload_llm = preload_llm

    async def startup(self, sockets: list | None = None) -> None:
        await super().startup(sockets)
        # The application is loaded: start-up is over here too for one that loads no Django
        # apps (a bare ASGI app), whose collection `quiet_start` turned off.
        start_done()
        start_pause_keeper()  # a chat burst's collection pause starts no thread on the loop
        if self.started and self.preload_llm:
            from openhive.engine.llm import get_litellm

            threading.Thread(target=get_litellm, name="preload-litellm", daemon=True).start()


def main(argv: list[str]) -> None:
    host, port = argv[0], int(argv[1])
    quiet_start()  # back on once the apps are loaded (uvicorn imports the application)
    app = argv[2] if len(argv) > 2 else "openhive.asgi:application"  # a benchmark's wrapper
    # Taken from the environment before the application loads, so that its ready() leaves
    # the preload to the server (`WebServer`).
    preload_llm = os.environ.pop("OPENHIVE_PRELOAD_LLM", "") == "background"
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        ws="websockets-sansio",
        lifespan="off",  # Channels' router has no lifespan protocol
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        ws_per_message_deflate=compression(),
    )
    server = WebServer(config, preload_llm=preload_llm)
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)


if __name__ == "__main__":
    main(sys.argv[1:])
