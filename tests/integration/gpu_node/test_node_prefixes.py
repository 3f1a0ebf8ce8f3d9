"""Two pipelines on one cluster, told apart by their topic prefix, each with its GPU node.

Their nodes are configured alike, as two `pagestream up` on one host are: the same
`node.group_id` and the same `node.transactional_id` (the default is
`pagestream-gpu-<hostname>`). Behind each pipeline's prefix they are different names on
the cluster, so neither node fences the other's transactions and neither joins the
other's group.

Before: the group and the transactional id ignored the prefix. The second node's
init_transactions fenced the first, whose next commit failed fatally, and the two
nodes fenced each other in a loop as they restarted."""

from __future__ import annotations

import pytest

from schemas import Operation, Options, PageState, Stage, decode
from streams.admin import topics_apply
from streams.kafka import clients as kafka
from streams.settings import Settings, TopicSettings
from streams.topics import Topology
from synth.dataset import generate
from tests.support.pages import produce_pages, read_committed, stage_topics

pytestmark = pytest.mark.kafka


def test_two_prefixed_pipelines_keep_their_nodes_apart(
    settings: Settings, topology: Topology, node_factory, make_page
) -> None:
    other = settings.model_copy(
        update={"topics": TopicSettings(prefix=f"{settings.topics.prefix}other.")}
    )
    topics_apply.apply(kafka.admin(other.kafka), other.topology)
    alike = {"transactional_id": "pagestream-gpu-samehost"}
    (doc,) = generate(11, 1, rotations=[0], width=320)
    page = make_page(doc.image, doc_id="one", operation=Operation.classify,
                     options=Options(auto_rotate=False))  # fmt: skip
    with node_factory(**alike) as first, node_factory(on=other, **alike) as second:
        for name, pipeline in (("first", settings), ("second", other)):
            work, facts = stage_topics(pipeline.topology)[Stage.classify]
            produce_pages(pipeline, work, [page.model_copy(update={"doc_id": name})])
            (msg,) = read_committed(pipeline, [facts], expect=1, timeout_s=120, settle_s=1)
            done = decode(PageState, msg.value())
            assert done.doc_id == name and done.classification is not None
        # Both still run: neither was fenced by the other's transactions.
        assert first.health.ready and second.health.ready
        assert first.settings.group_id != second.settings.group_id
        assert first.settings.transactional_id != second.settings.transactional_id
