"""What the GPU node makes of a page before its model: the fetch threads' part and the
compute thread's part. `PAGESTREAM_MODELS__INPUTS` chooses the path of the orient and
classify stages:

- `device` (the default; gpu_node/models/device_inputs.py): a fetch thread reads the
  page's bytes and `load_page` checks the header against the pixel budget, then decodes
  the page on the host, or leaves a JPEG encoded for the device's decoder (nvjpeg, on
  CUDA). The compute thread puts the whole batch on the models' device in one
  `decode_pages` call, turns the pages of the stages after orient upright there, and the
  models make their inputs a batch at a time (`make_inputs`, `make_tiles`). A page
  refused on the way is that task's outcome, its `ImageDecodeError`; the rest of its
  batch goes on.
- `host` (the first path, kept so the two can be compared through Kafka): a fetch
  thread decodes the page to an RGB array (`decode_image`), turns it upright and makes
  its model inputs page by page in PIL and numpy (`prepare`), for the model's `read`.

The ocr and extract stages read RGB arrays on either path: their engines take host
images.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from gpu_node.models.device_inputs import EncodedJpeg, Loaded, decode_pages, load_page, upright
from gpu_node.models.images import ImageDecodeError, RGBArray, decode_image
from gpu_node.models.orientation import correct
from gpu_node.models.registry import ModelRegistry
from schemas import PageState, Stage
from streams.blobs import BlobStore

# The stages whose inputs the device path makes.
DEVICE_STAGES = frozenset({Stage.orient, Stage.classify})
# What a task's fetch hands its stage: an RGB array (host path, ocr, extract), or a page
# made ready for `decode_pages` (device path).
PageImage = RGBArray | Loaded


class PageInputs:
    def __init__(self, blobs: BlobStore, models: ModelRegistry, *, max_pixels: int) -> None:
        self.blobs = blobs
        self.models = models
        self.max_pixels = max_pixels
        self.on_device = models.settings.inputs == "device"
        # None: a JPEG stays encoded for the device's decoder when the device is a GPU
        # (load_page). True takes that way on the CPU too, where torchvision's decoder
        # stands in for nvjpeg: the tests of a page the batch decoder refuses.
        self.jpeg_on_device: bool | None = None

    def device_stage(self, stage: Stage) -> bool:
        """Whether `stage`'s pages take the device path."""
        return self.on_device and stage in DEVICE_STAGES

    def fetch(self, stage: Stage, page: PageState) -> PageImage:
        """The page of a task, read and made ready for its stage (a fetch thread).
        Raises what refused it (BlobAccessError, ImageDecodeError): the task's outcome."""
        data = self.blobs.get(page.image.uri, expected_sha256=page.image.sha256)
        if self.device_stage(stage):
            return load_page(data, max_pixels=self.max_pixels, device=self.models.device.device,
                             jpeg_on_device=self.jpeg_on_device)  # fmt: skip
        image = decode_image(data, max_pixels=self.max_pixels)
        # Stages after orient see the upright page; the stored image stays as submitted.
        if stage is not Stage.orient and page.orientation is not None:
            image = correct(image, page.orientation)
        # The models' inputs, made off their thread.
        if stage is Stage.classify:
            self.models.classifier.prepare(image)
        elif stage is Stage.orient:
            self.models.prepare_orient(image)
        return image

    def pages(
        self, stage: Stage, pages: Sequence[PageState], fetched: Sequence[PageImage]
    ) -> list[torch.Tensor | ImageDecodeError]:
        """The fetched pages of a device stage's batch on the models' device (the compute
        thread): decoded in one call and, after orient, turned upright there; a page the
        decoder refused is its error, in its place."""
        decoded = decode_pages([loaded(f) for f in fetched], self.models.device.device,
                               max_pixels=self.max_pixels)  # fmt: skip
        if stage is Stage.orient:  # orient reads the page as submitted
            return decoded
        return [_upright(d, p) for d, p in zip(decoded, pages, strict=True)]


def loaded(image: PageImage) -> Loaded:
    """`image` as the device path's fetch made it."""
    if isinstance(image, torch.Tensor | EncodedJpeg):
        return image
    raise TypeError(f"a device stage was handed a host image ({type(image).__name__})")


def host_image(image: PageImage) -> RGBArray:
    """`image` as the host path's fetch made it (the ocr and extract stages)."""
    if isinstance(image, np.ndarray):
        return image
    raise TypeError(f"a host stage was handed a device page ({type(image).__name__})")


def _upright(
    page: torch.Tensor | ImageDecodeError, state: PageState
) -> torch.Tensor | ImageDecodeError:
    # The stored image stays as submitted; a page with no turn to undo is left as it is.
    turn = state.orientation.rotation_degrees if state.orientation is not None else 0
    return page if isinstance(page, ImageDecodeError) or not turn else upright(page, turn)
