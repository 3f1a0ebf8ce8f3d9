"""What each node of the embedded cluster runs with: its server.properties (plaintext,
or the secure SASL_SSL listener with the authorizer), its log4j2 config, and the
client settings of the broker's own admin principal.

`configure` writes all of it before a JVM starts (and formats a node's storage the
first time), so the unit tests can check it without running Kafka.
"""

from __future__ import annotations

import json

from streams.local import storage
from streams.local.jars import classpath, ensure_jars
from streams.local.nodes import BrokerError, Node, bootstrap_servers, layout
from streams.security import credentials
from streams.security import tls as broker_tls
from streams.security.acls import ADMIN
from streams.settings import BrokerSettings, KafkaSettings

_BROKER_LOG4J = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.state.name = state.change.logger
logger.state.level = WARN
"""

# Kafka's own authorizer for KRaft: ACLs live in the metadata log.
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def server_properties(
    settings: BrokerSettings, node: Node, nodes: list[Node], admin_password: str | None = None
) -> str:
    h = settings.host
    # Internal topics as a production cluster has them: three copies, two in sync to
    # acknowledge (with fewer nodes, as many as there are).
    replicas = str(min(3, len(nodes)))
    min_isr = "2" if len(nodes) >= 3 else "1"
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(f"{n.node_id}@{h}:{n.controller_port}" for n in nodes),
        "listeners": f"PLAINTEXT://{h}:{node.port},CONTROLLER://{h}:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{h}:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(node.data_dir / "kraft-logs"),
        "num.partitions": "1",
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        # Tests create and join many groups; the default 3 s delay only slows them.
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    }
    if settings.secure:
        if admin_password is None:
            raise BrokerError("a secure broker needs the admin password")
        props.update(_secure_properties(settings, node, admin_password))
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _secure_properties(settings: BrokerSettings, node: Node, admin_password: str) -> dict[str, str]:
    """One SASL_SSL listener (SCRAM-SHA-512) for clients and for the nodes between them,
    and the authorizer refusing whatever no ACL allows.

    Inter-broker traffic uses the same listener as the admin principal (a super user)
    rather than a separate unauthenticated one: a loopback PLAINTEXT listener would have
    to be a super user too, and anyone on the machine could reach it. The controller
    listener stays on the loopback host; it is SASL_PLAINTEXT with PLAIN (the layout
    Kafka's maintainers give for KRaft in KAFKA-15513: the controllers' own logins do
    not depend on credentials kept in the metadata they serve) for the same reason:
    without a login, a local process could send admin requests to it (KIP-919).
    """
    h = settings.host
    tls = broker_tls.TlsFiles.under(settings.data_dir)
    scram = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN}" password="{admin_password}";'
    )
    plain = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{ADMIN}" password="{admin_password}" user_{ADMIN}="{admin_password}";'
    )
    return {
        "listeners": f"SECURE://{h}:{node.port},CONTROLLER://{h}:{node.controller_port}",
        "advertised.listeners": f"SECURE://{h}:{node.port}",
        "listener.security.protocol.map": "SECURE:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SECURE",
        "sasl.enabled.mechanisms": credentials.MECHANISM,
        "sasl.mechanism.inter.broker.protocol": credentials.MECHANISM,
        "listener.name.secure.scram-sha-512.sasl.jaas.config": scram,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": plain,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca_cert),
        "ssl.client.auth": "none",
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{ADMIN}",
    }


def admin_kafka(settings: BrokerSettings) -> KafkaSettings:
    """Client settings of the broker's own admin principal (plaintext when not secure)."""
    base = KafkaSettings(
        bootstrap_servers=bootstrap_servers(settings), client_id="pagestream-broker"
    )
    if not (settings.secure or storage.recorded_secure(settings)):
        return base
    return credentials.role_kafka(settings, base, ADMIN)


def configure(settings: BrokerSettings, cluster_id: str | None = None) -> str:
    """Jars, and per node its server.properties and log4j2 config, its log dir formatted
    once (every node with the same cluster id: `cluster_id`, else a new one); returns
    the classpath."""
    cp = classpath(ensure_jars(settings))
    nodes = layout(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    recorded = storage.recorded_secure(settings)
    if recorded is not None and recorded != settings.secure:
        # Checked before anything is written: a running node's files stay as they are.
        mode = {True: "secure", False: "plaintext"}
        raise BrokerError(
            f"{settings.data_dir} holds a {mode[recorded]} broker; use another data folder "
            f"to run it {mode[settings.secure]}"
        )
    admin_password = None
    if settings.secure:
        broker_tls.ensure(settings.data_dir, [settings.host])
        admin_password = credentials.ensure(settings)[ADMIN].get_secret_value()
    cluster_file = settings.data_dir / "cluster.json"
    if len(nodes) > 1:
        if cluster_file.exists():
            cluster_id = json.loads(cluster_file.read_text())["cluster_id"]
        else:
            cluster_id = cluster_id or storage.new_cluster_id()
            cluster_file.write_text(json.dumps({"nodes": len(nodes), "cluster_id": cluster_id}))
    for node in nodes:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        props = node.data_dir / "server.properties"
        # A secure node's properties hold the admin password (its JAAS lines).
        props.touch(mode=0o600)
        props.chmod(0o600)
        props.write_text(server_properties(settings, node, nodes, admin_password))
        (node.data_dir / "log4j2.properties").write_text(_BROKER_LOG4J)
        log_dir = node.data_dir / "kraft-logs"
        if not (log_dir / "meta.properties").exists():
            cluster_id = cluster_id or storage.new_cluster_id()
            storage.format_storage(cp, props, log_dir, cluster_id, admin_password,
                                   settings.jvm_options)  # fmt: skip
    return cp
