"""`next_step()`: the one place that decides where a page goes next.

Pure: operation + options + the last completed stage and its result -> the next
work topic, or docs.pages.done. Ingest calls it for fresh pages, route for pages
coming back from the GPU node; nothing else routes.

| operation | stages (orient first unless auto_rotate=false) |
|---|---|
| classify | orient -> classify |
| extract  | orient -> extract (document_type from the client, else generic fields) |
| process  | orient -> classify -> extract |
| ocr      | orient -> ocr |

A `process` page whose classification is less confident than `min_confidence`
is not extracted: typed fields read with the wrong template would look right
and be wrong. It finishes with the classification and a note saying why. So
does a page classified `unknown` (a blank page, a photo, other paperwork):
there is no template to read it with.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas import DocumentType, Operation, PageState, Stage
from streams.topics import PAGES_DONE, WORK_BY_STAGE, TopicSpec

DEFAULT_MIN_CONFIDENCE = 0.6

_AFTER_ORIENT: dict[Operation, tuple[Stage, ...]] = {
    Operation.classify: (Stage.classify,),
    Operation.extract: (Stage.extract,),
    Operation.process: (Stage.classify, Stage.extract),
    Operation.ocr: (Stage.ocr,),
}


class RoutingError(ValueError):
    """The page's state cannot come from its own operation (e.g. ocr done on a classify page)."""


@dataclass(frozen=True)
class Route:
    topic: TopicSpec  # a gpu.* work topic, or docs.pages.done
    note: str | None = None  # why a page finishes early

    @property
    def done(self) -> bool:
        return self.topic is PAGES_DONE


def stages_for(operation: Operation, *, auto_rotate: bool) -> tuple[Stage, ...]:
    rest = _AFTER_ORIENT[operation]
    return (Stage.orient, *rest) if auto_rotate else rest


def next_step(page: PageState, *, min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> Route:
    stages = stages_for(page.operation, auto_rotate=page.options.auto_rotate)
    if page.error is not None:
        return Route(PAGES_DONE, "a stage reported an error")
    if page.last_stage is None:
        return Route(WORK_BY_STAGE[stages[0].value])
    if page.last_stage not in stages:
        raise RoutingError(
            f"last_stage {page.last_stage.value} is not a stage of operation "
            f"{page.operation.value} (auto_rotate={page.options.auto_rotate})"
        )
    _require_result(page)
    done = page.last_stage
    if done is Stage.orient and page.classification is not None and Stage.classify in stages:
        # The GPU node's page model classified the page in the pass that oriented it (an
        # upright page: the same pixels the classify stage would see): classify is done.
        done = Stage.classify
    if (
        done is Stage.classify
        and page.operation is Operation.process
        and page.classification is not None
        and page.classification.confidence < min_confidence
    ):
        return Route(
            PAGES_DONE,
            f"classification confidence {page.classification.confidence:.2f} is below "
            f"{min_confidence:.2f}: not extracted",
        )
    if (
        done is Stage.classify
        and page.operation is Operation.process
        and page.classification is not None
        and page.classification.document_type is DocumentType.unknown
    ):
        return Route(PAGES_DONE, "the page is not a known document type: not extracted")
    following = stages[stages.index(done) + 1 :]
    return Route(WORK_BY_STAGE[following[0].value]) if following else Route(PAGES_DONE)


def _require_result(page: PageState) -> None:
    result = {
        Stage.orient: page.orientation,
        Stage.classify: page.classification,
        Stage.extract: page.extraction,
        Stage.ocr: page.ocr or page.ocr_ref,
    }[page.last_stage]  # type: ignore[index]
    if result is None:
        assert page.last_stage is not None  # noqa: S101 - checked by the caller
        raise RoutingError(f"last_stage is {page.last_stage.value} but its result is missing")
