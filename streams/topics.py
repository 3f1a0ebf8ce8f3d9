"""Every topic of the pipeline: the single source of truth for names and configs.

Facts topics say what happened; work topics say what the GPU node must do.
Every record is keyed by doc_id, so all pages of a document share a partition
of each topic. `pagestream topics apply` makes a cluster match this file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

_HOUR_MS = 3_600_000
_DAY_MS = 24 * _HOUR_MS


@dataclass(frozen=True)
class TopicSpec:
    base: str
    partitions: int
    purpose: str
    retention_ms: int = 3 * _DAY_MS
    cleanup_policy: str = "delete"
    extra: dict[str, str] = field(default_factory=dict)
    # What more partitions would break, reported by `topics apply` when it adds them.
    grow_warning: str = ""
    # Named inside the agents' faust app ("<app id>-<base>"), as faust names its own.
    in_agents_app: bool = False

    def configs(self) -> dict[str, str]:
        """The topic-level configs `apply` enforces (others are left alone)."""
        conf = {"cleanup.policy": self.cleanup_policy, **self.extra}
        if "delete" in self.cleanup_policy.split(","):
            conf["retention.ms"] = str(self.retention_ms)
        return conf


RAW = TopicSpec("docs.raw", 6, "DocumentSubmitted from producers", retention_ms=7 * _DAY_MS)

GPU_ORIENT = TopicSpec("gpu.orient", 6, "PageState work: detect and correct rotation")
GPU_CLASSIFY = TopicSpec("gpu.classify", 6, "PageState work: classify the document type")
GPU_EXTRACT = TopicSpec("gpu.extract", 6, "PageState work: extract typed fields")
GPU_OCR = TopicSpec("gpu.ocr", 6, "PageState work: full-page OCR")

ORIENTED = TopicSpec("docs.oriented", 6, "PageState facts: orientation done")
CLASSIFIED = TopicSpec("docs.classified", 6, "PageState facts: classification done")
EXTRACTED = TopicSpec("docs.extracted", 6, "PageState facts: extraction done")
RECOGNIZED = TopicSpec("docs.recognized", 6, "PageState facts: OCR done")

# Adding partitions to a keyed topic moves doc_ids to other partitions; for these two
# it strands the pages deliver has collected so far for documents in flight.
_REKEYS_DELIVER = (
    "doc_ids move to other partitions: documents deliver is collecting now may never "
    "complete; stop producers and let docs.pages.done drain (lag 0) before growing it"
)
PAGES_DONE = TopicSpec(
    "docs.pages.done", 6, "PageState: every stage of the page done", grow_warning=_REKEYS_DELIVER
)
RESULTS = TopicSpec(
    "docs.results",
    6,
    "DocumentResult per doc_id (compacted: the latest result per document is kept)",
    cleanup_policy="compact",
    # Let consumers see a result for a while before compaction may drop an older
    # duplicate; tombstones (deletions) are kept a day for slow readers.
    extra={"min.compaction.lag.ms": str(_HOUR_MS), "delete.retention.ms": str(_DAY_MS)},
)
WEBHOOKS = TopicSpec(
    "docs.webhooks",
    6,
    "WebhookDelivery work: a terminal DocumentResult to POST to its callback (notify)",
    # As long as docs.raw: a receiver down over a weekend still gets its results (and
    # the webhook dead letters' originals stay readable as long).
    retention_ms=7 * _DAY_MS,
)
DLQ = TopicSpec(
    "docs.dlq", 3, "Dead letters: original key/value plus error headers", retention_ms=30 * _DAY_MS
)
PROGRESS = TopicSpec(
    "docs.progress",
    6,
    "Progress: where each page is, keyed doc_id/page_no (doc_id: the document), all of a "
    "document's keys on the partition of its doc_id; compacted to the latest per key",
    # Kept a week: long enough to ask about any document still in flight.
    retention_ms=7 * _DAY_MS,
    cleanup_policy="compact,delete",
    grow_warning="doc_ids move to other partitions: `pagestream status` misses the "
    "progress of documents in flight until they move again",
)

ALL: tuple[TopicSpec, ...] = (
    RAW,
    GPU_ORIENT,
    GPU_CLASSIFY,
    GPU_EXTRACT,
    GPU_OCR,
    ORIENTED,
    CLASSIFIED,
    EXTRACTED,
    RECOGNIZED,
    PAGES_DONE,
    RESULTS,
    WEBHOOKS,
    DLQ,
    PROGRESS,
)

# faust's state: deliver's page table and its changelog, "<app id>-<table>-changelog".
# Declared here so `topics apply` creates it before any worker starts: workers that
# start together would otherwise each try to create it, and one whose metadata still
# lacks it crashes its deliver agent (faust: PartitionsMismatch, 0 partitions).
AGENTS_APP_ID = "pagestream-agents"  # the default of AgentSettings.app_id
DELIVER_TABLE = "deliver-pages"
DELIVER_TABLE_CHANGELOG = TopicSpec(
    f"{DELIVER_TABLE}-changelog",
    PAGES_DONE.partitions,  # faust co-partitions a table with its source topic
    "faust changelog of deliver's page table (pages seen per doc_id)",
    # Compacted to the latest entry per doc_id, and entries older than a week deleted:
    # delivered markers expire after AgentSettings.delivered_ttl_s (a day), and a
    # restarted worker must not reload every document ever delivered.
    cleanup_policy="compact,delete",
    retention_ms=7 * _DAY_MS,
    grow_warning=_REKEYS_DELIVER,
    in_agents_app=True,
)

# Stage name -> the work topic the GPU node consumes and the facts topic it writes.
WORK_BY_STAGE: dict[str, TopicSpec] = {
    "orient": GPU_ORIENT,
    "classify": GPU_CLASSIFY,
    "extract": GPU_EXTRACT,
    "ocr": GPU_OCR,
}
FACTS_BY_STAGE: dict[str, TopicSpec] = {
    "orient": ORIENTED,
    "classify": CLASSIFIED,
    "extract": EXTRACTED,
    "ocr": RECOGNIZED,
}


@dataclass(frozen=True)
class Topology:
    """Topic names on one cluster: the specs above behind an optional prefix
    (one cluster can host several pipelines, and tests isolate themselves)."""

    prefix: str = ""
    agents_app_id: str = AGENTS_APP_ID

    @property
    def agents_app(self) -> str:
        """The agents' faust app id, which is also their consumer group."""
        return f"{self.prefix}{self.agents_app_id}"

    @property
    def route_group(self) -> str:
        """route's consumer group (streams/agents/loops.py): its own, beside the faust
        app's, since a group's members share one assignment protocol."""
        return f"{self.agents_app}-route"

    @property
    def deliver_group(self) -> str:
        """deliver's consumer group, as route's."""
        return f"{self.agents_app}-deliver"

    @property
    def agents_groups(self) -> tuple[str, str, str]:
        """Every consumer group of the CPU agents: the faust app's (ingest, notify),
        route's and deliver's."""
        return self.agents_app, self.route_group, self.deliver_group

    def own(self, name: str) -> str:
        """A consumer group or transactional id of this pipeline on the cluster: behind
        the same prefix as its topics, so two prefixed pipelines on one cluster never
        share a group or fence each other's transactions."""
        return f"{self.prefix}{name}"

    def name(self, spec: TopicSpec) -> str:
        if spec.in_agents_app:
            return f"{self.agents_app}-{spec.base}"
        return f"{self.prefix}{spec.base}"

    def specs(self) -> Iterator[tuple[str, TopicSpec]]:
        for spec in (*ALL, DELIVER_TABLE_CHANGELOG):
            yield self.name(spec), spec
