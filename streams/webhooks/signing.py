"""What a webhook receiver checks: the signature, timestamp and idempotency headers.

The receiver checks `X-Pagestream-Signature: sha256=<hex>`, the HMAC-SHA256 of
`<timestamp>.<body>` with the shared secret (the timestamp, in
`X-Pagestream-Timestamp`, lets it refuse replays), and dedupes on `Idempotency-Key`
(doc_id and the result's event id): agents are at-least-once, so a POST can repeat.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Pagestream-Signature"
TIMESTAMP_HEADER = "X-Pagestream-Timestamp"
IDEMPOTENCY_HEADER = "Idempotency-Key"


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"
