"""What can be wrong with an upload, as exception classes that callers can tell apart.

Every refusal of the bytes themselves is a ``MediaError``: ingest dead-letters the
document and ends it as `failed`, and never retries it (the same bytes fail the same
way). Its one-line message names sizes, counts and types only, never document content,
because it ends up in logs and in DLQ headers. The render process's own failures
(deadline, memory cap, crash) are MediaErrors too; they live beside the process, in
streams/media/sandbox.py.
"""

from __future__ import annotations


class MediaError(ValueError):
    """An upload that cannot become page images; the message is safe to log."""


class EmptyInputError(MediaError):
    pass


class UnsupportedMediaError(MediaError):
    pass


class TooManyPagesError(MediaError):
    pass


class ImageTooLargeError(MediaError):
    pass


class CorruptImageError(MediaError):
    pass


class CorruptPdfError(MediaError):
    pass


class EncryptedPdfError(MediaError):
    pass


class EmptyPdfError(MediaError):
    pass


class DocumentTooLargeError(MediaError):
    """The pages together are over the document's budget (pixels or bytes)."""


class UnsafePillowConfigError(RuntimeError):
    """Process-wide Pillow settings make decoding untrusted images unsafe.

    Not a MediaError: the upload is fine, the process is misconfigured, and
    dead-lettering every image would hide that.
    """
