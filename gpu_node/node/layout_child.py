"""A layout process's side (layout_workers.py): pages from a socket, one at a time.

    python -m gpu_node.node.layout_child FD

It says `("ready", pid)` once PyMuPDF is loaded. Each message then is `(result, width,
height, page)`; the answer is `("ok", laid out result, seconds it took)` or `("error",
exception class name)` for what the policy does not catch itself. The process ends when
the node closes its end; it ignores SIGINT and SIGTERM, which are the node's to handle.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from multiprocessing.connection import Connection
from typing import Any


def main(fd: int) -> int:
    conn = Connection(fd)
    # A Ctrl-C or a stop sent to the node's process group is the node's to handle: it
    # drains and then closes this socket, which ends this process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The policy's warnings (ids and counts, never content) go to the node's stderr.
    logging.basicConfig(level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    # PyMuPDF and the layout model load after the socket is ours.
    from gpu_node.node.layout import laid_out

    conn.send(("ready", os.getpid()))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return 0
        if job is None:
            return 0
        started = time.perf_counter()
        try:
            answer: tuple[Any, ...] = ("ok", laid_out(*job), time.perf_counter() - started)
        except Exception as exc:  # the node names it on the page's warning
            answer = ("error", type(exc).__name__)
        try:
            conn.send(answer)
        except OSError:  # the node is gone
            return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
