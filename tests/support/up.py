"""What `pagestream up` prints for its samples, plaintext or secure."""

from __future__ import annotations

import re

# Every sample of streams/local/up.py and the status it must end with.
EXPECTED = {
    "classify-cnh": "completed",
    "extract-rg-back": "completed",
    "process-cin": "completed",
    "process-cin-rotated": "completed",
    "ocr-pdf-2-pages": "completed",
    "ocr-born-digital-report": "completed",
    "ocr-table-and-header": "completed",
}


def sample_statuses(printed: str) -> dict[str, str]:
    """Sample name -> status, from the heading line printed for each result."""
    return dict(re.findall(r"sample-\d+-([\w-]+): \w+ -> (\w+)", printed))
