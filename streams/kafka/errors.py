"""Client errors as one line an operator can act on, never with a secret in it.

librdkafka reports a refused login as a transport-level error ("SASL authentication
error: ... invalid credentials ...") and a refused right as an *_AUTHORIZATION_FAILED
code; `explain` names the principal and the problem. Every message it returns has the
configured secrets masked, whatever the client put in it.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from streams.settings import KafkaSettings

_AUTHORIZATION = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "consumer group",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
}


# A partition without a leader for a moment (a topic just created), a broker restarting,
# a group coordinator loading: librdkafka's admin and offset calls return these instead
# of retrying, not always flagged retriable.
_PASSING = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
}


class KafkaAuthError(RuntimeError):
    """The cluster refused the configured credentials."""


def error_of(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether a read of the cluster's state (offsets, watermarks) is worth asking again:
    a retriable error, or a partition between leaders."""
    err = error_of(exc)
    return err is not None and (bool(err.retriable()) or err.code() in _PASSING)


def is_authentication(err: KafkaError) -> bool:
    text = err.str().lower()
    return err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED) or (
        "authentication" in text and "sasl" in text
    )


def diagnose(settings: KafkaSettings, timeout_s: float = 5.0) -> KafkaError | None:
    """Why the cluster does not answer these settings, when a login or TLS handshake is
    the reason (librdkafka tells its callback, not the failed call); None otherwise."""
    seen: list[KafkaError] = []
    # log_level 0: the probe's own connection errors are what it reports, once.
    admin = AdminClient(settings.confluent_config(error_cb=seen.append, log_level=0))
    try:
        admin.list_topics(timeout=timeout_s)
        return None
    except KafkaException:
        admin.poll(0.5)
    for err in seen:
        if is_authentication(err) or err.code() == KafkaError._SSL:
            return err
    return None


def explain(exc: BaseException, settings: KafkaSettings, *, probe: bool = False) -> str:
    """What went wrong, who asked, and what to check; secrets masked. With `probe`, a
    transport error is looked into (a refused login surfaces as one)."""
    err = error_of(exc)
    if probe and err is not None and err.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                                                    KafkaError._ALL_BROKERS_DOWN):  # fmt: skip
        err = diagnose(settings) or err
    who = (
        f"user {settings.sasl_username!r} ({settings.security_protocol}, {settings.sasl_mechanism})"
        if settings.uses_sasl
        else f"an unauthenticated client ({settings.security_protocol})"
    )
    where = settings.bootstrap_servers
    if isinstance(exc, KafkaAuthError) or (err is not None and is_authentication(err)):
        text = (
            f"Kafka at {where} refused the login of {who}: wrong user name or password, or "
            "the user does not exist on the cluster (check PAGESTREAM_KAFKA__SASL_USERNAME "
            "and PAGESTREAM_KAFKA__SASL_PASSWORD)"
        )
    elif err is not None and err.code() == KafkaError._SSL:
        text = (
            f"TLS handshake with Kafka at {where} failed for {who}: {err.str()} "
            "(check PAGESTREAM_KAFKA__SSL_CAFILE)"
        )
    elif err is not None and err.code() in _AUTHORIZATION:
        text = (
            f"Kafka at {where} refused {who} on a {_AUTHORIZATION[err.code()]} "
            f"({err.name()}): its ACLs do not allow this; see `pagestream acls show`"
        )
    elif err is not None:
        text = f"Kafka at {where} ({who}): {err.str()}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return mask(text, settings)


def mask(text: str, settings: KafkaSettings) -> str:
    for secret in (settings.sasl_password, settings.ssl_key_password):
        if secret is not None and secret.get_secret_value():
            text = text.replace(secret.get_secret_value(), "**********")
    return text
