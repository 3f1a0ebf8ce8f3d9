"""The GPU node's micro-batch loop and what it is made of.

`GpuNode` (loop.py) consumes the gpu.* work topics, runs the synchronous stages
(stages.py) on a compute thread and hands extraction and VLM page reading to the
`EngineScheduler` (engine_scheduler.py); `Outcomes` turns results and failures into
facts and dead letters, `Partitions` follows rebalances and holds partitions back,
and `Transactions` commits outputs with the consumed offsets, exactly once, in the
order `OffsetOrder` releases them. `build_node` and `run_node` (main.py) make and run
a node from the settings.
"""

# Nothing is re-exported: importing one module of the package (ordering.py, say) must not
# load torch, EasyOCR and the rest, which `make check`'s collection would pay on every
# worker. Import from the modules themselves.
