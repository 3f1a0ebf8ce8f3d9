"""The GPU node: the model set and the micro-batch loop that serves it over Kafka.

- `gpu_node.node`: the loop (Kafka in, one model set, Kafka out, exactly once), its
  transactions, offset order, outcomes, partitions and the engine scheduler;
- `gpu_node.models`: the page model, the orientation model and methods, EasyOCR,
  and the registry that loads them once per process;
- `gpu_node.extraction`: field extraction engines (rules over OCR, VLMs, hybrid);
- `gpu_node.dococr`: document OCR by a VLM (presets, reply parsing);
- `gpu_node.offline`: the tools that make and check the models (training,
  evaluation, the tiny test VLM);
- `gpu_node.cli`: the commands, registered on `pagestream` through the
  `pagestream.commands` entry point.

Nothing is imported here: `pagestream --help` loads `gpu_node.cli` through this
package and must not load torch.
"""

from __future__ import annotations

__all__ = ["cli", "dococr", "extraction", "models", "node", "offline"]
