"""The pipeline on one machine, without Docker: the embedded Kafka broker and `pagestream up`.

broker   start, stop, status of the embedded KRaft broker or local cluster (the
         public face of nodes, jars, config, storage and process)
up       `pagestream up`: broker, topics, a GPU node and an agent worker as child
         processes, then sample documents through them (imported where used: it
         pulls in the client and operations tooling)
ready    waiting for a local process's HTTP endpoint to answer (`pagestream up`'s
         gateway; the tests' and benches' servers)
"""

from __future__ import annotations

from streams.local import broker

__all__ = ["broker"]
