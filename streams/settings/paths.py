"""Where settings point by default: the user's cache folder and files shipped in the repository.

Kept apart so every section module resolves the same folders.
"""

from __future__ import annotations

from pathlib import Path

CACHE_DIR = Path.home() / ".cache" / "pagestream"
# streams/settings/paths.py: three levels below the repository root.
REPO_ROOT = Path(__file__).resolve().parents[2]
# The classifier checkpoint ships inside the gpu_node package.
WEIGHTS_DIR = REPO_ROOT / "gpu_node" / "weights"
