"""Make a cluster's ACLs (and, on the embedded broker, its SCRAM users) match
streams/security/acls.py, idempotently.

Missing bindings are created. Bindings of the declared principals that the declaration
does not hold are reported as stale, and deleted only with `prune`: one cluster can host
several pipelines (topic prefixes) whose roles share principals, and one pipeline's
apply must not strip another's rights. ACLs of other principals are never touched.
A second run changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)
from pydantic import SecretStr

from streams.security.acls import Role

_TIMEOUT_S = 30.0
_KINDS = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
          "transactional_id": ResourceType.TRANSACTIONAL_ID}  # fmt: skip
_PATTERNS = {"literal": ResourcePatternType.LITERAL, "prefixed": ResourcePatternType.PREFIXED}
# Kafka's default for SCRAM-SHA-512 (kafka-configs --add-config) is 4096 iterations.
_SCRAM_ITERATIONS = 8192


@dataclass(frozen=True)
class AclChange:
    action: str  # created | deleted | user
    principal: str
    detail: str

    def __str__(self) -> str:
        return f"{self.principal}: {self.action} {self.detail}"


def bindings(roles: Iterable[Role]) -> set[AclBinding]:
    """The ALLOW bindings the roles declare, one per operation."""
    return {
        AclBinding(
            _KINDS[g.kind],
            g.name,
            _PATTERNS[g.pattern],
            role.principal,
            "*",
            AclOperation[op],
            AclPermissionType.ALLOW,
        )
        for role in roles
        for g in role.grants
        for op in g.operations
    }


def current(admin: AdminClient, principals: Iterable[str]) -> set[AclBinding]:
    """The bindings the cluster holds for these principals."""
    found: set[AclBinding] = set()
    for principal in principals:
        # None matches any name and host (the client accepts it; its stubs say str).
        anything: str = None  # type: ignore[assignment]
        flt = AclBindingFilter(ResourceType.ANY, anything, ResourcePatternType.ANY, principal,
                               anything, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
        found.update(admin.describe_acls(flt, request_timeout=_TIMEOUT_S).result())
    return found


def apply(
    admin: AdminClient,
    roles: tuple[Role, ...],
    passwords: Mapping[str, SecretStr] | None = None,
    *,
    prune: bool = False,
) -> list[AclChange]:
    """Create missing users (when `passwords` names them) and ACLs; with `prune`, delete
    the declared principals' other ACLs. Returns what changed (and, without `prune`,
    the stale bindings left in place)."""
    changes = _create_users(admin, passwords) if passwords else []
    want = bindings(roles)
    have = current(admin, (r.principal for r in roles))
    missing = sorted(want - have, key=_order)
    stale = sorted(have - want, key=_order)
    if missing:
        for fut in admin.create_acls(missing, request_timeout=_TIMEOUT_S).values():
            fut.result()
    if stale and prune:
        filters = [_exact(b) for b in stale]
        for fut in admin.delete_acls(filters, request_timeout=_TIMEOUT_S).values():
            fut.result()
    changes += [AclChange("created", b.principal, describe(b)) for b in missing]
    # Like users, ACLs reach the brokers' authorizers asynchronously: return once the
    # cluster answers with them, so a client started next is judged by them.
    if missing or (stale and prune):
        _await(lambda: _settled(admin, roles, want, stale if prune else []), "ACL changes")
    action = "deleted" if prune else "stale (kept; --prune deletes it)"
    changes += [AclChange(action, b.principal, describe(b)) for b in stale]
    return changes


def _create_users(admin: AdminClient, passwords: Mapping[str, SecretStr]) -> list[AclChange]:
    """SCRAM-SHA-512 credentials for the users the cluster does not know yet (an existing
    user keeps its password: rotating one is a separate, deliberate act)."""
    new = sorted(set(passwords) - _scram_users(admin))
    if not new:
        return []
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, _SCRAM_ITERATIONS)
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(u, info, passwords[u].get_secret_value().encode()) for u in new
    ]
    for fut in admin.alter_user_scram_credentials(upserts, request_timeout=_TIMEOUT_S).values():
        fut.result()
    # The credentials reach the brokers' metadata asynchronously; a client logging in
    # right after apply returned would otherwise be refused for a moment.
    _await(lambda: set(new) <= _scram_users(admin), "SCRAM users")
    return [AclChange("user", f"User:{u}", "SCRAM-SHA-512 credential created") for u in new]


def _settled(
    admin: AdminClient, roles: tuple[Role, ...], want: set[AclBinding], gone: list[AclBinding]
) -> bool:
    have = current(admin, (r.principal for r in roles))
    return want <= have and not (set(gone) & have)


def _await(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not visible after {_TIMEOUT_S}s")
        time.sleep(0.1)


def _scram_users(admin: AdminClient) -> set[str]:
    described = admin.describe_user_scram_credentials(request_timeout=_TIMEOUT_S)
    # Asked for every user, the client answers with one future (not one per user).
    return set() if isinstance(described, dict) else set(described.result())


def _exact(b: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                            b.operation, b.permission_type)  # fmt: skip


def _n(value: object) -> str:
    # The client types these fields as enum | str | int; the broker's answers are enums.
    return value.name if isinstance(value, Enum) else str(value)


def _order(b: AclBinding) -> tuple[str, str, str, str, str]:
    return (b.principal, _n(b.restype), b.name, _n(b.resource_pattern_type), _n(b.operation))


def describe(b: AclBinding) -> str:
    return (
        f"{_n(b.permission_type)} {_n(b.operation)} on {_n(b.restype).lower()} {b.name!r} "
        f"({_n(b.resource_pattern_type).lower()})"
    )
