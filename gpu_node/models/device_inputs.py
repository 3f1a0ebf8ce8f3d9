"""Model inputs made from page bytes a batch at a time, by torch ops on the models' device.

The node's first input path (`images.decode_image`, then `classifier.to_input` and
`text_tiles.page_grey`/`page_tiles`, page by page in PIL and numpy) holds the GIL for
most of a page's 30 ms: on a GPU machine it fed the models at 38 pages/s, where the
models alone take 40,000. Here the same inputs are made for a whole batch at once:

1. `load_page` (the fetch threads, one page each): the header is read and the pixel
   budget checked before anything is decoded (`images.open_image`, the same refusals
   and messages as `decode_image`); then a JPEG that the device decodes (nvjpeg, on
   CUDA) stays encoded, and any other page is decoded on the host - JPEG and 8-bit RGB
   PNG by torchvision (libjpeg-turbo and libpng, without the GIL), anything else by PIL
   - into pinned memory when the device is a GPU.
2. `decode_pages` (the compute thread): the encoded JPEGs in one `decode_jpeg` call on
   the device, the host-decoded pages copied without blocking. A page the device
   decoder refuses is retried alone, then on the host, so a bad page fails by itself
   with its reason and the rest of its batch goes through.
3. `letterbox_batch` and `tiles_batch`: pages of one size are stacked and scaled in one
   call, so the Python work is per size, not per page.

The arithmetic follows PIL's and numpy's so that the answers stay those of the first
path (measured in docs/gpu-node.md): PIL's bilinear resize is two passes (across,
then down) over 8-bit pixels with a rounding after each, which is what `_resize_like_pil`
does with torch's antialiased bilinear (written to match PIL's filter); the grey page
is PIL's fixed-point ITU-R 601 luma; percentiles are numpy's linear ones, computed
exactly from a histogram of the 8-bit values (no sort, and no size limit).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torchvision.io import ImageReadMode, decode_jpeg, decode_png

from gpu_node.models.images import ImageDecodeError, RGBArray, decode_image, open_image

# Pages of one size stacked into one op call, at most: bounds the intermediate tensors
# (a 1,400-px grey page is 1.3 MB, in int16 for the ink test 2.6 MB).
GROUP = 32
_LETTERBOX_FILL = 128.0
# PIL's "L" from RGB: (R*19595 + G*38470 + B*7471 + 2^15) >> 16 (libImaging/Convert.c).
_LUMA = (19595, 38470, 7471)
# A JPEG whose end-of-image marker is not in its last bytes is likely truncated: such a
# page is decoded on the host, whose decoder says so, not by nvjpeg, which may not.
_EOI_WINDOW = 1024
# torchvision prefixes its errors with the C++ function and source line.
_SOURCE_PREFIX = re.compile(r"^[^,]*, \S+:\d+, ")


@dataclass(frozen=True)
class EncodedJpeg:
    """A JPEG left encoded for the device's decoder (nvjpeg decodes a batch in one call)."""

    data: torch.Tensor  # the file's bytes: uint8, 1-D, on the host


# What the fetch threads hand the compute thread for one page.
Loaded = torch.Tensor | EncodedJpeg


def load_page(
    data: bytes, *, max_pixels: int, device: torch.device, jpeg_on_device: bool | None = None
) -> Loaded:
    """The page made ready for `decode_pages`: checked, and decoded unless the device
    decodes it (`jpeg_on_device`, by default when the device is a GPU). Raises
    ImageDecodeError, with decode_image's messages, for a page refused here."""
    header = open_image(data, max_pixels=max_pixels)
    fmt, mode = header.format, header.mode
    if jpeg_on_device is None:
        jpeg_on_device = device.type == "cuda"
    # CMYK and other JPEG modes convert to RGB differently in torchvision and PIL: PIL.
    if fmt == "JPEG" and mode in ("RGB", "L"):
        if jpeg_on_device and data.rfind(b"\xff\xd9", max(0, len(data) - _EOI_WINDOW)) >= 0:
            return EncodedJpeg(_bytes_tensor(data))
        page = _torchvision(decode_jpeg, data)
    elif fmt == "PNG" and mode == "RGB":
        page = _torchvision(decode_png, data)
        if page.dtype != torch.uint8:  # a 16-bit PNG: PIL reduces it as decode_image does
            page = _pil(data, max_pixels)
    else:
        page = _pil(data, max_pixels)
    return page.pin_memory() if device.type == "cuda" else page


def decode_pages(
    loaded: Sequence[Loaded], device: torch.device, *, max_pixels: int
) -> list[torch.Tensor | ImageDecodeError]:
    """Each page as uint8 (3, H, W) on `device`, or the error that refused it."""
    out: list[torch.Tensor | ImageDecodeError] = []
    encoded: list[tuple[int, EncodedJpeg]] = []
    for i, page in enumerate(loaded):
        if isinstance(page, EncodedJpeg):
            encoded.append((i, page))
            out.append(ImageDecodeError("not decoded"))  # replaced below
        else:
            out.append(page.to(device, non_blocking=True))
    if not encoded:
        return out
    try:
        decoded: list[torch.Tensor | ImageDecodeError] = list(
            decode_jpeg([e.data for _, e in encoded], mode=ImageReadMode.RGB, device=device)
        )
    except RuntimeError:
        # One refused page fails the whole call: each alone, to find it.
        decoded = [_decode_alone(e, device, max_pixels) for _, e in encoded]
    for (i, _), result in zip(encoded, decoded, strict=True):
        out[i] = result
    return out


def pages_on_device(
    datas: Sequence[bytes],
    device: torch.device,
    *,
    max_pixels: int,
    jpeg_on_device: bool | None = None,
) -> list[torch.Tensor | ImageDecodeError]:
    """`load_page` and `decode_pages` in one (the probe and tests; the node splits them
    between its fetch threads and its compute thread)."""
    loaded: list[Loaded | ImageDecodeError] = []
    for data in datas:
        try:
            loaded.append(load_page(data, max_pixels=max_pixels, device=device,
                                    jpeg_on_device=jpeg_on_device))  # fmt: skip
        except ImageDecodeError as exc:
            loaded.append(exc)
    ok = [page for page in loaded if not isinstance(page, ImageDecodeError)]
    decoded = iter(decode_pages(ok, device, max_pixels=max_pixels))
    return [page if isinstance(page, ImageDecodeError) else next(decoded) for page in loaded]


def upright(page: torch.Tensor, degrees_clockwise: int) -> torch.Tensor:
    """`page` (C, H, W) turned clockwise by a multiple of 90 degrees (images.rotate)."""
    if degrees_clockwise % 90:
        raise ValueError(f"rotation must be a multiple of 90, got {degrees_clockwise}")
    return torch.rot90(page, k=-(degrees_clockwise // 90) % 4, dims=(1, 2))


def host_images(
    pages: Sequence[torch.Tensor], picked: Sequence[int] | None = None
) -> list[RGBArray]:
    """Pages (or the `picked` ones) back on the host as decode_image's (H, W, 3) arrays:
    for the models that read them there (EasyOCR's text method)."""
    chosen = pages if picked is None else [pages[i] for i in picked]
    return [page.permute(1, 2, 0).contiguous().cpu().numpy() for page in chosen]


def letterbox_batch(
    pages: Sequence[torch.Tensor], size: int, mean: Sequence[float], std: Sequence[float]
) -> torch.Tensor:
    """The page model's inputs, (n, 3, size, size) float32: `classifier.to_input` of each."""
    device = pages[0].device if pages else torch.device("cpu")
    canvas = torch.full((len(pages), 3, size, size), _LETTERBOX_FILL, device=device)
    for idx in _groups(pages):
        h, w = pages[idx[0]].shape[-2:]
        scale = size / max(w, h)
        nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
        resized = _resize_like_pil(torch.stack([pages[i] for i in idx]), nh, nw)
        top, left = (size - nh) // 2, (size - nw) // 2
        canvas[_index(idx, device), :, top : top + nh, left : left + nw] = resized.float()
    m = torch.tensor(mean, dtype=torch.float32, device=device).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32, device=device).view(1, 3, 1, 1)
    return (canvas / 255.0 - m) / s


def tiles_batch(
    pages: Sequence[torch.Tensor],
    *,
    long_side: int,
    tile: int,
    limit: int,
    ink_range: tuple[float, float],
    min_edges: float,
    ink_contrast: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The orientation model's inputs: the tiles of every page, page after page and best
    first within a page, (m, 1, tile, tile) float32 as `text_tiles.tiles_input` makes
    them; and how many each page has, (n,) int64. `text_tiles.page_tiles(page_grey(.))`
    of each page, with the same selection rules (passed in by text_tiles)."""
    device = pages[0].device if pages else torch.device("cpu")
    chosen = torch.zeros((len(pages), limit, tile, tile), dtype=torch.uint8, device=device)
    valid = torch.zeros((len(pages), limit), dtype=torch.bool, device=device)
    for idx in _groups(pages):
        grey = _grey(torch.stack([pages[i] for i in idx]), long_side)
        g, h, w = grey.shape
        rows, cols = h // tile, w // tile
        if rows == 0 or cols == 0:
            continue
        top, left = (h - rows * tile) // 2, (w - cols * tile) // 2
        used = grey[:, top : top + rows * tile, left : left + cols * tile]
        grid = used.reshape(g, rows, tile, cols, tile).transpose(2, 3)
        paper = _percentiles(grey.reshape(g, -1), (0.90,))[:, 0]
        # grid < paper - contrast in whole grey levels: x < t <=> x < ceil(t), and with
        # paper at most 255 the bound fits in uint8 (at most 0: no ink).
        below = torch.ceil(paper - ink_contrast).clamp(0, 255).to(torch.uint8)
        ink = grid < below.view(g, 1, 1, 1, 1)
        share = ink.sum(dim=(3, 4)).double() / (tile * tile)
        across = (ink[..., 1:] != ink[..., :-1]).sum(dim=(3, 4)).double() / (tile * (tile - 1))
        down = (ink[..., 1:, :] != ink[..., :-1, :]).sum(dim=(3, 4)).double() / ((tile - 1) * tile)
        edges = across + down
        usable = (share >= ink_range[0]) & (share <= ink_range[1]) & (edges >= min_edges)
        score = torch.where(usable, edges, torch.full_like(edges, -1.0)).reshape(g, rows * cols)
        k = min(limit, rows * cols)
        ranked, order = torch.sort(score, dim=1, descending=True, stable=True)
        best = order[:, :k]
        at = _index(idx, device)
        # Only the chosen tiles are copied out of the page.
        chosen[at, :k] = grid[torch.arange(g, device=device)[:, None], best // cols, best % cols]
        valid[at, :k] = ranked[:, :k] > 0
    tiles = 255 - chosen[valid]  # ink bright on a dark ground
    counts = valid.sum(dim=1)
    if not len(tiles):
        return torch.zeros((0, 1, tile, tile), device=device), counts
    lo, hi = _percentiles(tiles.reshape(len(tiles), -1), (0.05, 0.99)).float().unbind(1)
    lo, hi = lo.view(-1, 1, 1), hi.view(-1, 1, 1)
    x = ((tiles.float() - lo) / torch.clamp(hi - lo, min=16.0)).clamp(0.0, 1.0)
    return x[:, None], counts


# ---- helpers ----------------------------------------------------------------------


def _bytes_tensor(data: bytes) -> torch.Tensor:
    # A copy: torch.frombuffer on immutable bytes warns, and the tensor must own them.
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _torchvision(decode: Callable[..., torch.Tensor], data: bytes) -> torch.Tensor:
    try:
        return decode(_bytes_tensor(data), mode=ImageReadMode.RGB)
    except RuntimeError as exc:
        raise ImageDecodeError(f"corrupt or truncated image: {_reason(exc)}") from None


def _pil(data: bytes, max_pixels: int) -> torch.Tensor:
    # One copy, to (3, H, W) and writable (PIL's array is read-only).
    rgb = decode_image(data, max_pixels=max_pixels)
    return torch.from_numpy(np.ascontiguousarray(rgb.transpose(2, 0, 1)))


def _decode_alone(
    page: EncodedJpeg, device: torch.device, max_pixels: int
) -> torch.Tensor | ImageDecodeError:
    try:
        decoded: torch.Tensor = decode_jpeg(page.data, mode=ImageReadMode.RGB, device=device)
        return decoded
    except RuntimeError:
        pass
    # What the device's decoder refuses, the host's may read (nvjpeg lacks some JPEG
    # variants); if it cannot either, its reason is the page's.
    try:
        return _pil(page.data.numpy().tobytes(), max_pixels).to(device)
    except ImageDecodeError as exc:
        return exc


def _reason(exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return _SOURCE_PREFIX.sub("", first)


def _groups(pages: Sequence[torch.Tensor]) -> list[list[int]]:
    """Indices of pages of one size, at most GROUP a group."""
    by_size: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for i, page in enumerate(pages):
        by_size[tuple(page.shape)].append(i)
    return [idx[k : k + GROUP] for idx in by_size.values() for k in range(0, len(idx), GROUP)]


def _index(idx: list[int], device: torch.device) -> torch.Tensor:
    return torch.tensor(idx, dtype=torch.long, device=device)


def _round_u8(x: torch.Tensor) -> torch.Tensor:
    # PIL adds a half before its shift (rounds half up) and clips to 0..255.
    return torch.floor(x + 0.5).clamp_(0.0, 255.0)


def _resize_like_pil(
    x: torch.Tensor, height: int, width: int, *, floats: bool | None = None
) -> torch.Tensor:
    """(n, c, h, w) uint8 resized as PIL's BILINEAR resizes 8-bit images (within one grey
    level on a fraction of a percent of the pixels), still uint8.

    On the CPU torch has PIL's own algorithm for uint8 (two passes, 8-bit in between,
    as fast as PIL). CUDA has antialiased bilinear in floats only (`floats`, by default
    off the CPU): across, then down, rounded to whole levels after each pass as PIL does."""
    h, w = x.shape[-2:]
    if not (x.device.type != "cpu" if floats is None else floats):
        if (height, width) == (h, w):
            return x
        return F.interpolate(x, size=(height, width), mode="bilinear", antialias=True,
                             align_corners=False)  # fmt: skip
    y = x.float()
    if width != w:
        y = _round_u8(F.interpolate(y, size=(h, width), mode="bilinear", antialias=True,
                                    align_corners=False))  # fmt: skip
    if height != h:
        y = _round_u8(F.interpolate(y, size=(height, width), mode="bilinear", antialias=True,
                                    align_corners=False))  # fmt: skip
    return y.to(torch.uint8)


def _grey(rgb: torch.Tensor, long_side: int) -> torch.Tensor:
    """(n, 3, h, w) uint8 -> (n, h', w') uint8: `text_tiles.page_grey` of each page."""
    # PIL's fixed-point luma in int32, exactly as PIL computes it. (A 1x1 convolution in
    # float32 is exact too, but oneDNN took 50 ms a page for it on a busy 2-core CPU.)
    r, g, b = (c.to(torch.int32) for c in rgb.unbind(1))
    wr, wg, wb = _LUMA
    grey = ((r * wr + g * wg + b * wb + (1 << 15)) >> 16).to(torch.uint8)[:, None]
    h, w = grey.shape[-2:]
    scale = long_side / max(w, h)
    if abs(scale - 1) > 0.02:
        grey = _resize_like_pil(grey, max(1, round(h * scale)), max(1, round(w * scale)))
    return grey[:, 0]


def _percentiles(values: torch.Tensor, qs: Sequence[float]) -> torch.Tensor:
    """numpy.percentile(row, 100 * q) (its linear method) of each row of 8-bit `values`,
    (n, len(qs)) float64: the ranks' values read off a histogram of the 256 levels on the
    CPU, selected (`kthvalue`) on a GPU. Both are exact: the answers are the same."""
    size = values.shape[1]
    position = torch.tensor([q * (size - 1) for q in qs], dtype=torch.float64)
    first = torch.floor(position).long()
    second = torch.clamp(first + 1, max=size - 1)
    t = (position - first.double()).to(values.device)
    if values.device.type == "cpu":
        a, b = _ranked_by_histogram(values, first, second)
    else:
        # On CUDA a histogram is atomic adds, most of them into one bin (a page is mostly
        # paper): 9 ms for 32 pages on an H200, 60 % of a batch's input time. A select
        # per row (radix, in one block) has no such contention.
        a, b = _ranked_by_selection(values, first, second)
    diff = b - a
    # numpy's _lerp: from the nearer end, for the same rounding.
    return torch.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


def _ranked_by_histogram(
    values: torch.Tensor, first: torch.Tensor, second: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The values at 0-based ranks `first` and `second` of each row, (n, k) float64 each."""
    n, device = len(values), values.device
    # A histogram per row, of the bytes as they are: one call over the whole batch with a
    # bin range per row needs every value widened and offset first, 3-5x slower here.
    hist = [torch.bincount(row, minlength=256) for row in values]
    empty = torch.zeros((0, 256), dtype=torch.long, device=device)
    cumulative = (torch.stack(hist) if hist else empty).cumsum(dim=1)
    # The k-th smallest value (0-based) is the first level whose cumulative count passes k.
    a = torch.searchsorted(cumulative, first.to(device).expand(n, -1).contiguous(), right=True)
    b = torch.searchsorted(cumulative, second.to(device).expand(n, -1).contiguous(), right=True)
    return a.double(), b.double()


def _ranked_by_selection(
    values: torch.Tensor, first: torch.Tensor, second: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """`_ranked_by_histogram` by `kthvalue` (1-based) for each rank of `first`. The value
    at the next rank (`second`: first + 1, or the last) is the same value unless no
    more than first + 1 values are at most it; then it is the smallest value above it.
    Two elementwise passes: a second select would cost as much as the first."""
    a_cols: list[torch.Tensor] = []
    b_cols: list[torch.Tensor] = []
    for f, s in zip(first.tolist(), second.tolist(), strict=True):
        a = values.kthvalue(f + 1, dim=1).values
        b = a
        if s != f:
            at_most = (values <= a[:, None]).sum(dim=1)
            above = torch.where(values > a[:, None], values, 255).amin(dim=1)
            b = torch.where(at_most > s, a, above)
        a_cols.append(a.double())
        b_cols.append(b.double())
    return torch.stack(a_cols, dim=1), torch.stack(b_cols, dim=1)
