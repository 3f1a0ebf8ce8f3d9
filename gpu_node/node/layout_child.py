"""A layout process's side (layout_workers.py): pages from a socket, one at a time.

    python -m gpu_node.node.layout_child FD

Each message is `(result, width, height, page)`; the answer is `("ok", laid out result)`
or `("error", exception class name)` for what the policy does not catch itself. The
process ends when the node closes its end.
"""

from __future__ import annotations

import logging
import os
import sys
from multiprocessing.connection import Connection


def main(fd: int) -> int:
    conn = Connection(fd)
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
        try:
            conn.send(("ok", laid_out(*job)))
        except Exception as exc:  # the node names it on the page's warning
            conn.send(("error", type(exc).__name__))


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
