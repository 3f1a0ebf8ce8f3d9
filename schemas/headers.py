"""Kafka header names. Header values are UTF-8 strings."""

from __future__ import annotations

from functools import cache

from schemas.common import Record

# On every record.
EVENT_ID = "pagestream-event-id"  # uuid; consumers dedupe on it
SCHEMA = "pagestream-schema"  # e.g. "DocumentSubmitted/1", see schema_header()
TRACEPARENT = "traceparent"  # W3C trace context
# On the GPU node's facts: milliseconds of the model call that answered the page (its
# whole batch), so a record's hop time can be split into model time and the rest.
MODEL_MS = "pagestream-model-ms"

# On dead letters in docs.dlq: where the record came from and why it failed, the
# same facts Kafka Connect's `__connect.errors.*` headers carry.
ERROR_PREFIX = "pagestream.error."
ERROR_TOPIC = ERROR_PREFIX + "topic"
ERROR_PARTITION = ERROR_PREFIX + "partition"
ERROR_OFFSET = ERROR_PREFIX + "offset"
ERROR_TIMESTAMP = ERROR_PREFIX + "timestamp"  # of the original record
ERROR_STAGE = ERROR_PREFIX + "stage"
ERROR_GROUP = ERROR_PREFIX + "group"
ERROR_EXCEPTION_CLASS = ERROR_PREFIX + "exception.class"
ERROR_EXCEPTION_MESSAGE = ERROR_PREFIX + "exception.message"
ERROR_EXCEPTION_STACKTRACE = ERROR_PREFIX + "exception.stacktrace"
ERROR_ATTEMPTS = ERROR_PREFIX + "attempts"
ERROR_FAILED_AT = ERROR_PREFIX + "failed_at"
# Only when the original value was left out of the dead letter (it would not fit in
# a Kafka record): the value's size in bytes.
VALUE_DROPPED = ERROR_PREFIX + "value.dropped"
# With it, when the value was kept in the blob store: its URI, which replay reads.
VALUE_REF = ERROR_PREFIX + "value.ref"
# Only when the original record's own headers were left out too (they alone would not
# fit): their size in bytes. The error headers above always travel.
HEADERS_DROPPED = ERROR_PREFIX + "headers.dropped"
# Only when even the original key was left out (it alone would not fit): its size.
KEY_DROPPED = ERROR_PREFIX + "key.dropped"

ERROR_HEADERS = (
    ERROR_TOPIC,
    ERROR_PARTITION,
    ERROR_OFFSET,
    ERROR_TIMESTAMP,
    ERROR_STAGE,
    ERROR_GROUP,
    ERROR_EXCEPTION_CLASS,
    ERROR_EXCEPTION_MESSAGE,
    ERROR_EXCEPTION_STACKTRACE,
    ERROR_ATTEMPTS,
    ERROR_FAILED_AT,
)

# The schema header of a tick: an empty record the agents' leader sends to every
# partition of docs.pages.done at an interval, so deliver can end documents past their
# deadline on partitions where nothing else arrives.
TICK_SCHEMA = "Tick/1"

# Set by `pagestream dlq replay` so a record that keeps failing is not replayed forever.
REPLAY_COUNT = "pagestream.replay.count"


@cache  # one per record type, asked for by every record written
def schema_header(model_cls: type[Record]) -> str:
    """The `pagestream-schema` value for a record type, e.g. "DocumentSubmitted/1"."""
    version = model_cls.model_fields["schema_version"].default
    return f"{model_cls.__name__}/{version}"
