"""The secure embedded broker's principals: one generated password per role, in files.

``<data_dir>/credentials/<role>.env`` (folder 0700, files 0600) holds the settings a
process of that role needs, as ``PAGESTREAM_KAFKA__*`` lines: SASL_SSL, SCRAM-SHA-512,
its user name and password, the CA to trust. ``PAGESTREAM_ENV_FILE=<file>`` makes a
pagestream command read one (streams/settings/root.py); `pagestream up --secure` hands each
child its role's
values through the environment (never argv). Passwords never leave these files and the
environments made from them: they are SecretStr everywhere else.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from pydantic import SecretStr

from streams.security import tls as broker_tls
from streams.security.acls import ROLES
from streams.settings import BrokerSettings, KafkaSettings, Settings

MECHANISM = "SCRAM-SHA-512"
_PASSWORD = "PAGESTREAM_KAFKA__SASL_PASSWORD"  # noqa: S105 - a variable name, not a secret


class CredentialsError(RuntimeError):
    pass


def folder(broker: BrokerSettings) -> Path:
    return broker.data_dir / "credentials"


def ensure(broker: BrokerSettings) -> dict[str, SecretStr]:
    """Every role's password, generated on first use (an existing file is kept)."""
    creds = folder(broker)
    creds.mkdir(parents=True, exist_ok=True, mode=0o700)
    creds.chmod(0o700)
    ca = broker_tls.TlsFiles.under(broker.data_dir).ca_cert
    passwords = {}
    for role in ROLES:
        path = creds / f"{role}.env"
        if not path.exists():
            # URL-safe characters only: the password also sits inside the broker's JAAS
            # line and an env file, where quotes or spaces would need escaping.
            password = secrets.token_urlsafe(24)
            lines = {
                "PAGESTREAM_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
                "PAGESTREAM_KAFKA__SASL_MECHANISM": MECHANISM,
                "PAGESTREAM_KAFKA__SASL_USERNAME": role,
                _PASSWORD: password,
                "PAGESTREAM_KAFKA__SSL_CAFILE": str(ca),
            }
            path.touch(mode=0o600)
            path.chmod(0o600)
            path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        passwords[role] = SecretStr(role_env(broker, role)[_PASSWORD])
    return passwords


def role_file(broker: BrokerSettings, role: str) -> Path:
    """The file of one role's PAGESTREAM_KAFKA__* settings (for PAGESTREAM_ENV_FILE)."""
    path = folder(broker) / f"{role}.env"
    if not path.exists():
        raise CredentialsError(
            f"no credentials for role {role!r} in {folder(broker)}: "
            "start the broker with `pagestream broker start --secure` first"
        )
    return path


def role_env(broker: BrokerSettings, role: str) -> dict[str, str]:
    """The PAGESTREAM_KAFKA__* variables of one role."""
    path = role_file(broker, role)
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs}


def role_kafka(broker: BrokerSettings, base: KafkaSettings, role: str) -> KafkaSettings:
    """`base` (bootstrap, client id, limits) as the principal of `role`."""
    env = role_env(broker, role)
    return base.model_copy(
        update={
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": MECHANISM,
            "sasl_username": role,
            "sasl_password": SecretStr(env[_PASSWORD]),
            "ssl_cafile": Path(env["PAGESTREAM_KAFKA__SSL_CAFILE"]),
        }
    )


def as_role(settings: Settings, role: str) -> Settings:
    """`settings` with the Kafka client of `role` on the secure embedded broker (unchanged
    when the broker is not secure)."""
    if not settings.broker.secure:
        return settings
    return settings.model_copy(update={"kafka": role_kafka(settings.broker, settings.kafka, role)})
