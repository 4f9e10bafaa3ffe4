"""Image files read one batch at a time: a lazy ``(N, H, W, C)`` view for folder and CSV datasets.

A user's held-out set is thousands of camera frames; holding every one as float32
would cost ``N*H*W*C*4`` bytes (20,000 frames of 224x224x3: 12 GB).  An
:class:`ImageFiles` holds only the file paths.  Indexing with a slice, an index
array or a boolean mask gives another ``ImageFiles`` (still nothing decoded);
``np.asarray(files)`` decodes them (float32 in [0, 1], as every dataset holds);
``files.uint8()`` decodes to 8-bit pixels, which the input contract maps to model
inputs without a float pass over the raw pixels.  The predictors read a lazy
``x`` batch by batch, so memory stays at one batch of images.

Only headers are read up front (size and mode of every file, to reject mixed sizes
and unreadable files early); a file that fails to decode later raises
:class:`~workbench.errors.DataError` naming it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError

GRAY_MODES = ("L", "1", "I", "I;16", "F", "LA")


class ImageFiles:
    """Lazy float32 ``(N, H, W, C)`` pixels of image files (decoded on access)."""

    dtype = np.dtype(np.float32)
    ndim = 4

    def __init__(self, paths: Sequence[str | os.PathLike], *, height: int, width: int, channels: int,
                 resize: tuple[int, int] | None = None, fingerprints: np.ndarray | None = None):
        self.paths = np.asarray([os.fspath(p) for p in paths], dtype=object)
        self.height, self.width, self.channels = int(height), int(width), int(channels)
        self.resize = None if resize is None else (int(resize[0]), int(resize[1]))
        self._fingerprints = fingerprints

    # -- array-like surface ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (len(self.paths), self.height, self.width, self.channels)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, np.integer)):
            return self._decode([self.paths[int(key)]], np.float32)[0]
        if isinstance(key, tuple):
            return np.asarray(self)[key]
        fps = self._fingerprints[key] if self._fingerprints is not None else None
        return ImageFiles(self.paths[key], height=self.height, width=self.width, channels=self.channels,
                          resize=self.resize, fingerprints=fps)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self._decode(self.paths, np.float32)
        return out if dtype is None else out.astype(dtype)

    def astype(self, dtype: Any, copy: bool = True) -> np.ndarray:
        return np.asarray(self).astype(dtype)

    def uint8(self) -> np.ndarray:
        """The pixels as uint8 ``(N, H, W, C)`` (0..255), decoded now."""
        return self._decode(self.paths, np.uint8)

    def __getattr__(self, name: str) -> Any:
        # Anything else an ndarray has (min, max, mean, reshape...) works on the decoded pixels.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(np.asarray(self), name)

    def __repr__(self) -> str:
        return f"ImageFiles(n={len(self)}, shape={self.shape})"

    # -- decoding ---------------------------------------------------------------------------------
    def _decode(self, paths: Sequence[str] | np.ndarray, dtype: Any) -> np.ndarray:
        from PIL import Image, UnidentifiedImageError
        out = np.empty((len(paths), self.height, self.width, self.channels), dtype=np.uint8)
        mode = "L" if self.channels == 1 else "RGB"
        for i, p in enumerate(paths):
            try:
                with Image.open(p) as opened:
                    img = opened.convert(mode) if opened.mode != mode else opened
                    if self.resize is not None and img.size != (self.width, self.height):
                        img = img.resize((self.width, self.height), Image.Resampling.BILINEAR)
                    arr = np.asarray(img)
            except (UnidentifiedImageError, OSError, SyntaxError) as exc:
                raise DataError(f"{p}: unreadable image ({exc}). Remove it or replace it with a PNG/JPEG.") from exc
            if arr.shape[:2] != (self.height, self.width):
                raise DataError(f"{p}: image is {arr.shape[1]}x{arr.shape[0]} but the dataset's images are "
                                f"{self.width}x{self.height}; pass resize=(height, width) (CLI: --resize HxW).")
            out[i] = arr.reshape(self.height, self.width, self.channels)
        if dtype == np.uint8:
            return out
        return out.astype(np.float32) / np.float32(255.0)     # as x / 255.0 (see contract.check_pixels)

    # -- identity ------------------------------------------------------------------------------
    def fingerprint(self) -> str:
        """Hash of the files' paths, sizes and modification times (and the resize): changes when a
        file changes, without reading every image."""
        digest = hashlib.sha256()
        digest.update(repr((self.shape, self.resize)).encode())
        if self._fingerprints is not None:
            digest.update("\0".join(self._fingerprints.tolist()).encode())
        else:
            for p in self.paths:
                st = os.stat(p)
                digest.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        return digest.hexdigest()


def open_image_files(paths: Sequence[Path], resize: tuple[int, int] | None) -> ImageFiles:
    """Read the headers of ``paths`` (size, mode) and return the lazy view.

    Mixed sizes without ``resize`` and unreadable files are errors naming the file; a mix of
    grayscale and colour files is read as RGB.
    """
    from PIL import Image, UnidentifiedImageError
    sizes: dict[tuple[int, int], Path] = {}
    modes = set()
    fps = []
    for p in paths:
        try:
            with Image.open(p) as img:
                w, h = img.size
                modes.add("L" if img.mode in GRAY_MODES else "RGB")
        except (UnidentifiedImageError, OSError, SyntaxError) as exc:
            raise DataError(f"{p}: unreadable image ({exc}). Remove it or replace it with a PNG/JPEG.") from exc
        sizes.setdefault((h, w), p)
        st = os.stat(p)
        fps.append(f"{p}\0{st.st_size}\0{st.st_mtime_ns}")
    if resize is None and len(sizes) > 1:
        (s1, p1), (s2, p2) = list(sizes.items())[:2]
        raise DataError(f"images have mixed sizes: {p1} is {s1[1]}x{s1[0]} but {p2} is {s2[1]}x{s2[0]}. "
                        "Pass resize=(height, width) (CLI: --resize HxW) to choose a size.")
    h, w = resize if resize is not None else next(iter(sizes))
    channels = 1 if modes == {"L"} else 3
    return ImageFiles(list(paths), height=h, width=w, channels=channels, resize=resize,
                      fingerprints=np.asarray(fps, dtype=object))
