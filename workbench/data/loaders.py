"""Load a dataset from a built-in name, a folder, a CSV manifest or an ``.npz``.

``load_dataset(name_or_path)`` picks the loader:

- ``digits-conditions`` (built-in): scikit-learn's bundled handwritten digits
  (real scans, no download) upscaled to 32x32 grayscale, split deterministically
  from a seed; every deployment condition appears in ``test``, while the
  ``calibration`` pool is about 90% daylight, as real calibration sets are;
- a folder ``ROOT/<split>/<condition>/<class>/<image>`` of PNG/JPEG images;
- a CSV manifest with columns ``path,label,condition,split`` (paths relative to the CSV);
- an ``.npz`` with arrays ``x``, ``y``, ``condition``, ``split`` (optional ``ids``, ``classes``).
"""

from __future__ import annotations

import csv
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..errors import DataError
from .conditions import BUILTIN_CONDITIONS, apply_condition
from .dataset import SPLITS, Dataset

BUILTIN = ("digits-conditions",)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


def load_dataset(name_or_path: str | os.PathLike | Dataset, *, resize: tuple[int, int] | None = None,
                 classes: tuple[str, ...] | None = None, seed: int = 0) -> Dataset:
    """Load a dataset by built-in name or path.

    ``resize=(height, width)`` is the policy for image files of mixed sizes (without it,
    mixed sizes are an error).  ``classes`` fixes the label set: a label outside it is an
    error.  ``seed`` drives the built-in dataset's split and condition noise.
    """
    if isinstance(name_or_path, Dataset):
        return name_or_path
    text = os.fspath(name_or_path)
    if text in BUILTIN:
        return _digits_conditions(seed)
    path = Path(text)
    if not path.exists():
        raise DataError(f"{text}: no such dataset. Give a built-in name ({', '.join(BUILTIN)}), a folder "
                        "ROOT/<split>/<condition>/<class>/<image>, a CSV manifest or an .npz file.")
    if path.is_dir():
        return _load_folder(path, resize=resize, classes=classes)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _load_csv(path, resize=resize, classes=classes)
    if suffix == ".npz":
        return _load_npz(path, classes=classes)
    raise DataError(f"{path}: unsupported dataset file type {suffix!r}; expected a folder, .csv or .npz.")


# -- built-in --------------------------------------------------------------------------------

DIGITS_SIZE = 32
DIGITS_SEVERITY = 3
CALIBRATION_DAYLIGHT_SHARE = 0.9


def render_digits(images8: np.ndarray, size: int = DIGITS_SIZE) -> np.ndarray:
    """8x8 ink densities (0..16) -> float32 (N, size, size, 1) photos of dark ink on bright paper."""
    from PIL import Image
    out = np.empty((len(images8), size, size, 1), dtype=np.float32)
    for i, img in enumerate(images8):
        ink = Image.fromarray((img.reshape(8, 8) / 16.0).astype(np.float32), mode="F")
        ink = np.asarray(ink.resize((size, size), Image.Resampling.BICUBIC), dtype=np.float32)
        out[i, :, :, 0] = 0.92 - 0.78 * np.clip(ink, 0.0, 1.0)   # paper 0.92, full ink 0.14
    return out


@lru_cache(maxsize=4)
def _digits_conditions(seed: int = 0) -> Dataset:
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = render_digits(digits.images)
    labels = digits.target.astype(np.int64)
    rng = np.random.default_rng(seed)

    # Deterministic stratified split of the 1797 scans: 50% train, 20% calibration, 30% test.
    split_of = np.empty(len(labels), dtype=object)
    for cls in range(10):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        n_train, n_cal = int(round(0.5 * len(idx))), int(round(0.2 * len(idx)))
        split_of[idx[:n_train]] = "train"
        split_of[idx[n_train:n_train + n_cal]] = "calibration"
        split_of[idx[n_train + n_cal:]] = "test"

    parts: list[tuple[np.ndarray, np.ndarray, str, str, list[str]]] = []
    train = np.flatnonzero(split_of == "train")
    parts.append((images[train], labels[train], "daylight", "train", [f"train-{i:04d}" for i in train]))

    # Calibration pool: every calibration scan in daylight, plus a few scans under each other
    # condition so that daylight is ~90% of the pool.
    cal = np.flatnonzero(split_of == "calibration")
    parts.append((images[cal], labels[cal], "daylight", "calibration", [f"cal-{i:04d}" for i in cal]))
    others = [c for c in BUILTIN_CONDITIONS if c != "daylight"]
    n_extra = int(round(len(cal) * (1 - CALIBRATION_DAYLIGHT_SHARE) / CALIBRATION_DAYLIGHT_SHARE / len(others)))
    extra = rng.permutation(cal)
    for k, cond in enumerate(others):
        pick = np.sort(extra[k * n_extra:(k + 1) * n_extra])
        x = apply_condition(images[pick], cond, severity=DIGITS_SEVERITY, seed=seed + 1)
        parts.append((x, labels[pick], cond, "calibration", [f"cal-{i:04d}@{cond}" for i in pick]))

    # Test: every test scan under every condition (paired across conditions).
    test = np.flatnonzero(split_of == "test")
    for cond in BUILTIN_CONDITIONS:
        x = apply_condition(images[test], cond, severity=DIGITS_SEVERITY, seed=seed + 2)
        parts.append((x, labels[test], cond, "test", [f"test-{i:04d}@{cond}" for i in test]))

    return Dataset(
        name="digits-conditions",
        x=np.concatenate([p[0] for p in parts]).astype(np.float32),
        y=np.concatenate([p[1] for p in parts]),
        condition=np.concatenate([np.full(len(p[0]), p[2], dtype=object) for p in parts]).astype(str),
        split=np.concatenate([np.full(len(p[0]), p[3], dtype=object) for p in parts]).astype(str),
        ids=np.array([sid for p in parts for sid in p[4]]),
        classes=tuple(str(c) for c in range(10)),
        source=f"scikit-learn load_digits (UCI optical digits), 32x32, severity {DIGITS_SEVERITY}, seed {seed}",
        condition_order=BUILTIN_CONDITIONS,
    )


# -- image files ------------------------------------------------------------------------------

def _sort_classes(names: set[str]) -> tuple[str, ...]:
    if all(n.lstrip("-").isdigit() for n in names):
        return tuple(sorted(names, key=int))
    return tuple(sorted(names))


def _read_images(paths: list[Path], resize: tuple[int, int] | None) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError
    arrays, sizes, modes = [], {}, set()
    for p in paths:
        try:
            with Image.open(p) as img:
                img.load()
                mode = "L" if img.mode in ("L", "1", "I", "I;16", "F") else "RGB"
                img = img.convert(mode)
                if resize is not None:
                    img = img.resize((resize[1], resize[0]), Image.Resampling.BILINEAR)
                arr = np.asarray(img, dtype=np.float32) / 255.0
        except (UnidentifiedImageError, OSError, SyntaxError) as exc:
            raise DataError(f"{p}: unreadable image ({exc}). Remove it or replace it with a PNG/JPEG.") from exc
        sizes.setdefault(arr.shape[:2], p)
        modes.add(mode)
        arrays.append(arr if arr.ndim == 3 else arr[..., None])
    if len(sizes) > 1:
        (s1, p1), (s2, p2) = list(sizes.items())[:2]
        raise DataError(f"images have mixed sizes: {p1} is {s1[1]}x{s1[0]} but {p2} is {s2[1]}x{s2[0]}. "
                        "Pass resize=(height, width) (CLI: --resize HxW) to choose a size.")
    if len(modes) > 1:  # grayscale and colour mixed: promote all to RGB
        arrays = [np.repeat(a, 3, axis=2) if a.shape[2] == 1 else a for a in arrays]
    return np.stack(arrays).astype(np.float32)


def _build(name: str, source: Path, rows: list[tuple[Path, str, str, str]],
           resize: tuple[int, int] | None, classes: tuple[str, ...] | None, where: str) -> Dataset:
    if not rows:
        raise DataError(f"{source}: no images found ({where}). Expected PNG/JPEG files.")
    labels = {r[1] for r in rows}
    if classes is None:
        classes = _sort_classes(labels)
    else:
        unknown = sorted(labels - set(classes))
        if unknown:
            bad = next(r for r in rows if r[1] == unknown[0])
            raise DataError(f"{bad[0]}: unknown label {unknown[0]!r}; known classes: {', '.join(classes)}.")
    for r in rows:
        if r[3] not in SPLITS:
            raise DataError(f"{r[0]}: unknown split {r[3]!r}; splits are {', '.join(SPLITS)}.")
    index = {c: i for i, c in enumerate(classes)}
    x = _read_images([r[0] for r in rows], resize)
    root = source if source.is_dir() else source.parent
    return Dataset(
        name=name, x=x, y=np.array([index[r[1]] for r in rows], dtype=np.int64),
        condition=np.array([r[2] for r in rows]), split=np.array([r[3] for r in rows]),
        ids=np.array([os.path.relpath(r[0], root) for r in rows]), classes=tuple(classes),
        source=str(source))


def _load_folder(root: Path, *, resize, classes) -> Dataset:
    split_dirs = sorted(d for d in root.iterdir() if d.is_dir())
    if not split_dirs:
        raise DataError(f"{root}: empty folder. Expected ROOT/<split>/<condition>/<class>/<image> "
                        f"with splits {', '.join(SPLITS)}.")
    rows = []
    for split_dir in split_dirs:
        if split_dir.name not in SPLITS:
            raise DataError(f"{split_dir}: unknown split folder {split_dir.name!r}; expected one of "
                            f"{', '.join(SPLITS)} (layout ROOT/<split>/<condition>/<class>/<image>).")
        cond_dirs = sorted(d for d in split_dir.iterdir() if d.is_dir())
        if not cond_dirs:
            raise DataError(f"{split_dir}: split {split_dir.name!r} has no samples (no condition folders).")
        split_rows = 0
        for cond_dir in cond_dirs:
            files = sorted(p for p in cond_dir.glob("*/*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise DataError(f"{cond_dir}: condition {cond_dir.name!r} has no samples "
                                f"(no images under {cond_dir}/<class>/).")
            rows += [(p, p.parent.name, cond_dir.name, split_dir.name) for p in files]
            split_rows += len(files)
    return _build(root.name, root, rows, resize, classes, "under <split>/<condition>/<class>/")


def _load_csv(path: Path, *, resize, classes) -> Dataset:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        required = {"path", "label", "condition", "split"}
        if reader.fieldnames is None or not required <= set(reader.fieldnames):
            raise DataError(f"{path}: a CSV manifest needs the columns path,label,condition,split; "
                            f"found {', '.join(reader.fieldnames or []) or 'no header'}.")
        rows = []
        for line, rec in enumerate(reader, start=2):
            image = (path.parent / rec["path"]).resolve()
            if not image.is_file():
                raise DataError(f"{path}:{line}: image {rec['path']!r} not found (paths are relative to the CSV).")
            rows.append((image, rec["label"].strip(), rec["condition"].strip(), rec["split"].strip()))
    return _build(path.stem, path, rows, resize, classes, "the manifest has no rows")


def _load_npz(path: Path, *, classes) -> Dataset:
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise DataError(f"{path}: not a readable .npz file ({exc}).") from exc
    missing = [k for k in ("x", "y", "condition", "split") if k not in data.files]
    if missing:
        raise DataError(f"{path}: missing array(s) {', '.join(missing)}; an .npz dataset needs x, y, condition, split.")
    x = np.asarray(data["x"])
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / 255.0
    x = x.astype(np.float32)
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4:
        raise DataError(f"{path}: x must be NHWC or NHW images; got shape {x.shape}.")
    if len(x) == 0:
        raise DataError(f"{path}: x has no samples.")
    y = np.asarray(data["y"]).astype(np.int64)
    file_classes = tuple(str(c) for c in data["classes"]) if "classes" in data.files else None
    classes = classes or file_classes or tuple(str(c) for c in range(int(y.max()) + 1))
    bad = np.flatnonzero((y < 0) | (y >= len(classes)))
    if len(bad):
        raise DataError(f"{path}: sample {int(bad[0])} has unknown label {int(y[bad[0]])}; "
                        f"labels must index the {len(classes)} classes {', '.join(classes)}.")
    split = np.asarray(data["split"]).astype(str)
    unknown = sorted(set(split.tolist()) - set(SPLITS))
    if unknown:
        raise DataError(f"{path}: unknown split {unknown[0]!r}; splits are {', '.join(SPLITS)}.")
    ids = np.asarray(data["ids"]).astype(str) if "ids" in data.files else np.array([f"{path.stem}-{i}" for i in range(len(x))])
    return Dataset(name=path.stem, x=x, y=y, condition=np.asarray(data["condition"]).astype(str),
                   split=split, ids=ids, classes=classes, source=str(path))


def export_npz(dataset: Dataset, path: str | os.PathLike, *, split: str, condition: str | None = None) -> Path:
    """Write ``x`` (float32 NHWC, what the model takes) and ``y`` of one split (and condition)."""
    import io
    from .._io import atomic_write_bytes
    subset = dataset.select(split=split, condition=condition)
    buf = io.BytesIO()
    np.savez(buf, x=subset.x.astype(np.float32), y=subset.y.astype(np.int64),
             condition=subset.condition, split=subset.split, ids=subset.ids,
             classes=np.array(dataset.classes))
    return atomic_write_bytes(path, buf.getvalue())
