"""The one exception a consumer needs to catch when a record cannot be read."""

from __future__ import annotations

# Enough to recognise the problem in a log line or a DLQ header; `.problems` has all.
_PROBLEMS_IN_REASON = 3


class RecordError(ValueError):
    """A record value that cannot be decoded or validated.

    `reason` is one line for logs and the DLQ `exception.message` header;
    `problems` lists every individual problem (one per invalid field).
    """

    def __init__(self, reason: str, problems: list[str] | None = None) -> None:
        self.reason = " ".join(reason.split())  # one line, whatever went in
        self.problems = problems if problems is not None else [self.reason]
        super().__init__(self.reason)

    @classmethod
    def from_problems(cls, problems: list[str]) -> RecordError:
        """One error for several problems; each already names its field."""
        reason = "; ".join(problems[:_PROBLEMS_IN_REASON])
        if len(problems) > _PROBLEMS_IN_REASON:
            more = len(problems) - _PROBLEMS_IN_REASON
            reason += f"; and {more} more problem{'s' if more > 1 else ''}"
        return cls(reason, problems)
