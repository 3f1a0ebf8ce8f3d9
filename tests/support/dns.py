"""A DNS server on 127.0.0.1 (UDP) for webhook name resolution tests: the narrow test
double for the outside DNS the standards allow. Standard library only.

It answers A and AAAA questions for the names it is given (TTL 0, so c-ares's cache
keeps no address and every look-up asks A again; it may keep an empty AAAA answer),
never answers the names it is told to ignore (a DNS that does not answer, which no
timeout of ours may outlast), answers NXDOMAIN to the first questions of a name when
told to (a name that appears later), and NXDOMAIN for the rest. Every question is
counted and signalled, so a test waits on an event, not a sleep.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import struct
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

_A, _AAAA = 1, 28
_NOERROR, _NXDOMAIN = 0, 3


@dataclass
class DnsServer:
    """What the server answers; change it between look-ups, it reads it per question."""

    addresses: dict[str, list[str]] = field(default_factory=dict)  # name -> its addresses
    silent: set[str] = field(default_factory=set)  # names never answered
    # Questions answered NXDOMAIN before the name's addresses (a look-up asks A and AAAA).
    missing_first: Counter[str] = field(default_factory=Counter)
    questions: Counter[str] = field(default_factory=Counter)  # per name, every question
    a_questions: Counter[str] = field(default_factory=Counter)  # per name: one per look-up
    asked: threading.Condition = field(default_factory=threading.Condition)
    nameserver: str = ""  # "127.0.0.1:port", once started

    def wait_asked(self, name: str, times: int = 1, timeout: float = 10.0) -> bool:
        """Until `name` was asked at least `times` times (either family)."""
        with self.asked:
            return self.asked.wait_for(lambda: self.questions[name] >= times, timeout)

    def answer(self, query: bytes) -> bytes | None:
        (qid, flags, qdcount), end = struct.unpack("!HHH", query[:6]), 12
        labels: list[str] = []
        while query[end]:
            labels.append(query[end + 1 : end + 1 + query[end]].decode("ascii").lower())
            end += 1 + query[end]
        qtype = struct.unpack("!H", query[end + 1 : end + 3])[0]
        question = query[12 : end + 5]
        name = ".".join(labels)
        with self.asked:
            self.questions[name] += 1
            self.a_questions[name] += qtype == _A
            self.asked.notify_all()
        if name in self.silent:
            return None
        rcode, records = _NXDOMAIN, []
        if self.missing_first[name] > 0:
            self.missing_first[name] -= 1
        elif name in self.addresses:
            rcode = _NOERROR
            packed = [ipaddress.ip_address(a).packed for a in self.addresses[name]]
            size = 4 if qtype == _A else 16
            # Each record names the question by a pointer to it (offset 12).
            records = [struct.pack("!HHHIH", 0xC00C, qtype, 1, 0, size) + p
                       for p in packed if len(p) == size]  # fmt: skip
        # QR and RA set, RD echoed.
        header = struct.pack("!HHHHHH", qid, 0x8080 | (flags & 0x0100) | rcode, qdcount,
                             len(records), 0, 0)  # fmt: skip
        return header + question + b"".join(records)


@contextmanager
def dns_server(port: int = 0) -> Iterator[DnsServer]:
    """A DnsServer on 127.0.0.1 (any free port unless given), stopped (its thread
    joined) when the block ends."""
    server = DnsServer()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", port))
    server.nameserver = f"127.0.0.1:{sock.getsockname()[1]}"
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            ready, _, _ = select.select([sock], [], [], 0.05)  # polls `stop`
            if not ready:
                continue
            query, peer = sock.recvfrom(4096)
            reply = server.answer(query)
            if reply is not None:
                sock.sendto(reply, peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(5)
        sock.close()
