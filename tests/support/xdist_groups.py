"""`--dist loadgroup` as pytest-xdist means it, under pytest 9.

xdist 3.8 sends a test marked `xdist_group(name)` to the worker of its group by suffixing
its node id with `@name` on the worker (`item._nodeid = ...`). pytest 9 keeps a node's id
in `_id` (a NodeId), so that assignment changes nothing, and every group is silently
spread over the workers (checked 2026-11-27 with pytest 9.2.0, xdist 3.8.0): the vLLM
tests started a `vllm serve` and their engines on each worker, the chaos tests ran side
by side. `suffix_groups` sets the id xdist meant to set, once.
"""

from __future__ import annotations

import pytest
from _pytest.nodeid import NodeId


def suffix_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each item marked with xdist groups gets its node id suffixed `@group[_group...]`,
    on an xdist worker under `--dist loadgroup` only (and never twice)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})  # fmt: skip
        if names and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")
