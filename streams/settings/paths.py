"""Where settings point by default: the user's cache folder and files shipped in packages.

Kept apart so every section module resolves the same folders. Shipped files (the
model checkpoints in gpu_node/weights, the broker's Maven pom in streams/local) are
package data: found through the installed package, editable or not, from any folder.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

CACHE_DIR = Path.home() / ".cache" / "pagestream"


def shipped(package: str, *parts: str) -> Path:
    """A file shipped inside `package` (package data). The package is located, not
    imported: gpu_node stands above streams and must not load for a settings default."""
    top, *below = package.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {top} is not installed")
    return Path(next(iter(spec.submodule_search_locations)), *below, *parts)


# The classifier and orientation checkpoints ship inside the gpu_node package.
WEIGHTS_DIR = shipped("gpu_node", "weights")
