"""Load a dataset from a built-in name, a folder, a CSV manifest or an ``.npz``.

``load_dataset(name_or_path)`` picks the loader:

- ``digits-conditions`` (built-in): scikit-learn's bundled handwritten digits
  (real scans, no download) upscaled to 32x32 grayscale, split deterministically
  from a seed; every deployment condition appears in ``test``, while the
  ``calibration`` pool is mostly daylight (359 daylight + 50 of each other condition), as
  real calibration pools are, yet holds enough of each condition for a stratified set of 200;
- ``digits-keypoints`` (built-in): the same images, labelled with three keypoints per
  digit (the ink's centroid and the top-left and bottom-right corners of its bounding
  box, ``(y, x)`` in [0, 1] of the image): a non-classification task;
- a folder ``ROOT/<split>/<condition>/<class>/<image>`` of PNG/JPEG images;
- a CSV manifest with columns ``path,label,condition,split`` (paths relative to the CSV);
- an ``.npz`` with arrays ``x``, ``y``, ``condition``, ``split`` (optional ``ids``, ``classes``);
  ``y`` may be one class index per sample or an array per sample (keypoints, boxes...).

Labels of any shape for folder and CSV datasets come from a **labels file**: ``labels.npz``
in the folder's root (or ``<csv stem>.labels.npz`` beside a CSV) with arrays ``ids`` (the
image paths relative to the root/CSV, as the dataset's ids) and ``y`` (one array per
sample).  With it, a folder's images may sit anywhere below ``<split>/<condition>/`` and
a CSV needs no ``label`` column.

Folder and CSV images are not decoded at load time: ``x`` is a lazy
:class:`~workbench.data.images.ImageFiles` read batch by batch where it is used.
Pixels must be uint8 or floats in [0, 1]; an ``.npz`` with uint16 pixels, 0..255
floats or NaN is rejected at load time, naming the sample.
"""

from __future__ import annotations

import csv
import os
from functools import lru_cache
from pathlib import Path
from typing import cast

import numpy as np

from ..errors import DataError
from .conditions import BUILTIN_CONDITIONS, apply_condition
from .dataset import SPLITS, Dataset

BUILTIN = ("digits-conditions", "digits-keypoints")
LABELS_FILE = "labels.npz"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


def load_dataset(name_or_path: str | os.PathLike | Dataset, *, resize: tuple[int, int] | None = None,
                 classes: tuple[str, ...] | None = None, seed: int = 0, severity: int | None = None) -> Dataset:
    """Load a dataset by built-in name or path.

    ``resize=(height, width)`` is the policy for image files of mixed sizes (without it,
    mixed sizes are an error).  ``classes`` fixes the label set: a label outside it is an
    error.  ``seed`` drives the built-in dataset's split and condition noise.  ``severity``
    (1 mild .. 5 harsh; default ``DIGITS_SEVERITY`` = 3) renders a built-in dataset's ``test``
    conditions at that severity; its calibration pool stays as collected (severity 3), so a
    calibration set drawn at one severity picks the same images at another.  Recorded datasets
    (folder, CSV, .npz) have no severity: giving one is an error.
    """
    if severity is not None:
        from .._validation import check_choice
        check_choice("severity", severity, (1, 2, 3, 4, 5), error=DataError)
        name = getattr(name_or_path, "name", None) if isinstance(name_or_path, Dataset) else os.fspath(name_or_path)
        if name not in BUILTIN:
            raise DataError(f"`severity` grades the synthetic conditions of the built-in datasets "
                            f"({', '.join(BUILTIN)}); {name!r} holds recorded images, whose conditions have no "
                            "severity. Drop the severity.")
        if isinstance(name_or_path, Dataset):
            name_or_path = name
    if isinstance(name_or_path, Dataset):
        return name_or_path
    text = os.fspath(name_or_path)
    if text == "digits-conditions":
        return _digits_conditions(seed, DIGITS_SEVERITY if severity is None else severity)
    if text == "digits-keypoints":
        return _digits_keypoints(seed, DIGITS_SEVERITY if severity is None else severity)
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
#: scans of the calibration split rendered under each condition other than daylight: enough for the
#: default stratified calibration set (200 samples, 40 per condition) to reach every condition's share
CALIBRATION_PER_CONDITION = 50


def render_digits(images8: np.ndarray, size: int = DIGITS_SIZE) -> np.ndarray:
    """8x8 ink densities (0..16) -> float32 (N, size, size, 1) photos of dark ink on bright paper."""
    from PIL import Image
    out = np.empty((len(images8), size, size, 1), dtype=np.float32)
    for i, img in enumerate(images8):
        pic = Image.fromarray((img.reshape(8, 8) / 16.0).astype(np.float32), mode="F")
        ink = np.asarray(pic.resize((size, size), Image.Resampling.BICUBIC), dtype=np.float32)
        out[i, :, :, 0] = 0.92 - 0.78 * np.clip(ink, 0.0, 1.0)   # paper 0.92, full ink 0.14
    return out


@lru_cache(maxsize=8)   # one per (seed, severity) in use: the explorer's severity knob keeps each it showed
def _digits_conditions(seed: int = 0, severity: int = DIGITS_SEVERITY) -> Dataset:
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

    # Calibration pool: every calibration scan in daylight, plus CALIBRATION_PER_CONDITION scans under
    # each other condition (daylight is ~64% of the pool; a plain random draw under-represents the rest).
    cal = np.flatnonzero(split_of == "calibration")
    parts.append((images[cal], labels[cal], "daylight", "calibration", [f"cal-{i:04d}" for i in cal]))
    others = [c for c in BUILTIN_CONDITIONS if c != "daylight"]
    n_extra = CALIBRATION_PER_CONDITION
    extra = rng.permutation(cal)
    for k, cond in enumerate(others):
        pick = np.sort(extra[k * n_extra:(k + 1) * n_extra])
        x = apply_condition(images[pick], cond, severity=DIGITS_SEVERITY, seed=seed + 1)
        parts.append((x, labels[pick], cond, "calibration", [f"cal-{i:04d}@{cond}" for i in pick]))

    # Test: every test scan under every condition (paired across conditions).
    test = np.flatnonzero(split_of == "test")
    for cond in BUILTIN_CONDITIONS:
        x = apply_condition(images[test], cond, severity=severity, seed=seed + 2)
        parts.append((x, labels[test], cond, "test", [f"test-{i:04d}@{cond}" for i in test]))

    return Dataset(
        name="digits-conditions",
        x=np.concatenate([p[0] for p in parts]).astype(np.float32),
        y=np.concatenate([p[1] for p in parts]),
        condition=np.concatenate([np.full(len(p[0]), p[2], dtype=object) for p in parts]).astype(str),
        split=np.concatenate([np.full(len(p[0]), p[3], dtype=object) for p in parts]).astype(str),
        ids=np.array([sid for p in parts for sid in p[4]]),
        classes=tuple(str(c) for c in range(10)),
        source=(f"scikit-learn load_digits (UCI optical digits), 32x32, severity {DIGITS_SEVERITY}, seed {seed}"
                if severity == DIGITS_SEVERITY else
                f"scikit-learn load_digits (UCI optical digits), 32x32, test conditions at severity {severity} "
                f"(calibration pool at {DIGITS_SEVERITY}), seed {seed}"),
        condition_order=BUILTIN_CONDITIONS,
    )


KEYPOINT_NAMES = ("centroid", "top-left", "bottom-right")
INK_THRESHOLD = 0.25


def digit_keypoints(images8: np.ndarray, size: int = DIGITS_SIZE) -> np.ndarray:
    """Three keypoints per digit, ``(N, 3, 2)`` float32 ``(y, x)`` in [0, 1] of the image: the
    ink's centroid (ink-weighted) and the top-left and bottom-right corners of the box around the
    ink above ``INK_THRESHOLD``, measured on the clean ``size`` x ``size`` rendering."""
    clean = render_digits(images8, size)[..., 0]
    ink = np.clip((0.92 - clean) / 0.78, 0.0, 1.0)
    grid = (np.arange(size, dtype=np.float32) + 0.5) / size
    out = np.empty((len(ink), 3, 2), np.float32)
    for i, plane in enumerate(ink):
        total = float(plane.sum()) or 1.0
        out[i, 0] = (plane.sum(axis=1) @ grid / total, plane.sum(axis=0) @ grid / total)
        rows = np.flatnonzero((plane > INK_THRESHOLD).any(axis=1))
        cols = np.flatnonzero((plane > INK_THRESHOLD).any(axis=0))
        out[i, 1] = (rows[0] / size, cols[0] / size)
        out[i, 2] = ((rows[-1] + 1) / size, (cols[-1] + 1) / size)
    return out


@lru_cache(maxsize=4)
def _digits_keypoints(seed: int = 0, severity: int = DIGITS_SEVERITY) -> Dataset:
    """``digits-conditions`` with keypoint labels ``(3, 2)`` per sample instead of the digit class."""
    from sklearn.datasets import load_digits
    base = _digits_conditions(seed, severity)
    keypoints = digit_keypoints(load_digits().images)
    scan = np.array([int(sid.split("@")[0].split("-")[1]) for sid in base.ids.tolist()])
    return Dataset(name="digits-keypoints", x=base.x, y=keypoints[scan], condition=base.condition,
                   split=base.split, ids=base.ids, classes=(), source=base.source + "; keypoints "
                   + ", ".join(KEYPOINT_NAMES) + " as (y, x) in [0, 1]", condition_order=base.condition_order)


# -- image files ------------------------------------------------------------------------------

def _sort_classes(names: set[str]) -> tuple[str, ...]:
    if all(n.lstrip("-").isdigit() for n in names):
        return tuple(sorted(names, key=int))
    return tuple(sorted(names))


def _labels_file(path: Path) -> dict[str, np.ndarray] | None:
    """``{image id: label array}`` from a labels file, or ``None`` when there is none."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            ids, y = data["ids"].astype(str), np.asarray(data["y"])
    except Exception as exc:  # noqa: BLE001 - numpy raises many types for a bad file
        raise DataError(f"{path}: not a readable labels file ({exc}); it needs arrays `ids` (image paths "
                        "relative to the dataset root) and `y` (one label array per sample).") from exc
    if len(ids) != len(y):
        raise DataError(f"{path}: `ids` has {len(ids)} entries but `y` has {len(y)}; one label per image.")
    return {str(i): y[k] for k, i in enumerate(ids)}


def _build(name: str, source: Path, rows: list[tuple[Path, str, str, str]],
           resize: tuple[int, int] | None, classes: tuple[str, ...] | None, where: str,
           labels: dict[str, np.ndarray] | None = None) -> Dataset:
    from .images import open_image_files
    if not rows:
        raise DataError(f"{source}: no images found ({where}). Expected PNG/JPEG files.")
    for r in rows:
        if r[3] not in SPLITS:
            raise DataError(f"{r[0]}: unknown split {r[3]!r}; splits are {', '.join(SPLITS)}.")
    root = source if source.is_dir() else source.parent
    ids = [os.path.relpath(r[0], root) for r in rows]
    if labels is not None:
        missing = [i for i in ids if i not in labels]
        if missing:
            raise DataError(f"{source}: the labels file has no label for image {missing[0]!r}"
                            f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}; "
                            "its `ids` are image paths relative to the dataset root.")
        y = np.stack([np.asarray(labels[i]) for i in ids])
        classes = tuple(classes or ())
    else:
        names = {r[1] for r in rows}
        if classes is None:
            classes = _sort_classes(names)
        else:
            unknown = sorted(names - set(classes))
            if unknown:
                bad = next(r for r in rows if r[1] == unknown[0])
                raise DataError(f"{bad[0]}: unknown label {unknown[0]!r}; known classes: {', '.join(classes)}.")
        index = {c: i for i, c in enumerate(classes)}
        y = np.array([index[r[1]] for r in rows], dtype=np.int64)
    x = open_image_files([r[0] for r in rows], resize)
    return Dataset(
        name=name, x=cast(np.ndarray, x), y=y,   # the lazy ImageFiles stands in for the array (see Dataset)
        condition=np.array([r[2] for r in rows]), split=np.array([r[3] for r in rows]),
        ids=np.array(ids), classes=tuple(classes), source=str(source))


def _load_folder(root: Path, *, resize, classes) -> Dataset:
    split_dirs = sorted(d for d in root.iterdir() if d.is_dir())
    if not split_dirs:
        raise DataError(f"{root}: empty folder. Expected ROOT/<split>/<condition>/<class>/<image> "
                        f"with splits {', '.join(SPLITS)}.")
    labels = _labels_file(root / LABELS_FILE)
    pattern = "**/*" if labels is not None else "*/*"
    rows = []
    for split_dir in split_dirs:
        if split_dir.name not in SPLITS:
            raise DataError(f"{split_dir}: unknown split folder {split_dir.name!r}; expected one of "
                            f"{', '.join(SPLITS)} (layout ROOT/<split>/<condition>/<class>/<image>).")
        cond_dirs = sorted(d for d in split_dir.iterdir() if d.is_dir())
        if not cond_dirs:
            raise DataError(f"{split_dir}: split {split_dir.name!r} has no samples (no condition folders).")
        for cond_dir in cond_dirs:
            files = sorted(p for p in cond_dir.glob(pattern) if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise DataError(f"{cond_dir}: condition {cond_dir.name!r} has no samples "
                                f"(no images under {cond_dir}/<class>/).")
            rows += [(p, p.parent.name, cond_dir.name, split_dir.name) for p in files]
    return _build(root.name, root, rows, resize, classes, "under <split>/<condition>/<class>/", labels)


def _load_csv(path: Path, *, resize, classes) -> Dataset:
    labels = _labels_file(path.with_name(path.stem + "." + LABELS_FILE))
    try:
        return _read_csv(path, labels=labels, resize=resize, classes=classes)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at offset "
                        f"{exc.start}); save the manifest as UTF-8 (e.g. `iconv -f latin1 -t utf-8`).") from None


def _read_csv(path: Path, *, labels, resize, classes) -> Dataset:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        required = {"path", "condition", "split"} | (set() if labels is not None else {"label"})
        if reader.fieldnames is None or not required <= set(reader.fieldnames):
            raise DataError(f"{path}: a CSV manifest needs the columns path,label,condition,split (label may be "
                            f"left out when {path.stem}.{LABELS_FILE} holds the labels); "
                            f"found {', '.join(reader.fieldnames or []) or 'no header'}.")
        rows = []
        for line, rec in enumerate(reader, start=2):
            short = [k for k in required if rec.get(k) is None]
            if short or None in rec:
                raise DataError(f"{path}:{line}: the row has {len([v for v in rec.values() if v is not None])} "
                                f"field(s) but the header names {len(reader.fieldnames)}"
                                f"{' (missing ' + ', '.join(sorted(short)) + ')' if short else ''}; "
                                "give every row path,label,condition,split.")
            image = (path.parent / rec["path"]).resolve()
            if not image.is_file():
                raise DataError(f"{path}:{line}: image {rec['path']!r} not found (paths are relative to the CSV).")
            rows.append((image, (rec.get("label") or "").strip(), rec["condition"].strip(), rec["split"].strip()))
    return _build(path.stem, path, rows, resize, classes, "the manifest has no rows", labels)


def _load_npz(path: Path, *, classes) -> Dataset:
    from ..models.contract import check_pixels
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise DataError(f"{path}: not a readable .npz file ({exc}).") from exc
    missing = [k for k in ("x", "y", "condition", "split") if k not in data.files]
    if missing:
        raise DataError(f"{path}: missing array(s) {', '.join(missing)}; an .npz dataset needs x, y, condition, split.")
    _refuse_objects(path, data)
    x = np.asarray(data["x"])
    if x.dtype.kind not in "biuf":
        raise DataError(f"{path}: x holds {x.dtype} values; pixels must be uint8, or floats in [0, 1].")
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4:
        raise DataError(f"{path}: x must be NHWC or NHW images; got shape {x.shape}.")
    if len(x) == 0:
        raise DataError(f"{path}: x has no samples.")
    ids = (np.asarray(data["ids"]).astype(str) if "ids" in data.files
           else np.array([f"{path.stem}-{i}" for i in range(len(x))]))
    x = check_pixels(x, ids=ids, where=str(path))          # uint8 -> /255; uint16, 0..255 floats, NaN: errors
    y = np.asarray(data["y"])
    if y.dtype.kind not in "biuf":
        raise DataError(f"{path}: y holds {y.dtype} values; labels must be numbers (class indices, with the "
                        "class names in a `classes` array, or arrays for keypoints/boxes).")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        bad = int(np.flatnonzero(~np.isfinite(y).reshape(len(y), -1).all(axis=1))[0])
        raise DataError(f"{path}: sample {bad} has a NaN or infinite label; every label must be a finite number.")
    if len(y) != len(x):
        raise DataError(f"{path}: y has {len(y)} entries but x has {len(x)} samples; one label per sample.")
    file_classes = tuple(str(c) for c in data["classes"]) if "classes" in data.files else None
    if y.ndim == 1 and y.dtype.kind == "f" and (file_classes is not None or classes):
        fractional = np.flatnonzero(y != np.round(y))
        if len(fractional):  # class labels are never truncated
            k = int(fractional[0])
            raise DataError(f"{path}: sample {k} has class label {float(y[k])!r}, not a whole number; class "
                            "labels are integer indices into `classes`.")
    if y.ndim == 1 and (y.dtype.kind in "iu" or (file_classes is not None and np.all(y == np.round(y)))):
        y = y.astype(np.int64)
        classes = classes or file_classes or tuple(str(c) for c in range(int(y.max()) + 1))
        unknown_label = np.flatnonzero((y < 0) | (y >= len(classes)))
        if len(unknown_label):
            k = int(unknown_label[0])
            raise DataError(f"{path}: sample {k} has unknown label {int(y[k])}; "
                            f"labels must index the {len(classes)} classes {', '.join(classes)}.")
    else:
        classes = tuple(classes or file_classes or ())    # labels of any shape (keypoints, boxes...)
    split = np.asarray(data["split"]).astype(str)
    unknown = sorted(set(split.tolist()) - set(SPLITS))
    if unknown:
        raise DataError(f"{path}: unknown split {unknown[0]!r}; splits are {', '.join(SPLITS)}.")
    return Dataset(name=path.stem, x=x, y=y, condition=np.asarray(data["condition"]).astype(str),
                   split=split, ids=ids, classes=classes, source=str(path))


def _refuse_objects(path: Path, data) -> None:
    """An array of Python objects would need unpickling (code execution): name it and refuse."""
    for key in data.files:
        try:
            data[key]
        except ValueError as exc:
            raise DataError(f"{path}: array `{key}` holds Python objects (dtype=object); the workbench never "
                            "unpickles data. Save numbers and strings as plain numpy arrays.") from exc


def export_npz(dataset: Dataset, path: str | os.PathLike, *, split: str, condition: str | None = None) -> Path:
    """Write ``x`` (float32 NHWC, what the model takes) and ``y`` of one split (and condition)."""
    import io

    from .._io import atomic_write_bytes
    subset = dataset.select(split=split, condition=condition)
    buf = io.BytesIO()
    y = subset.y.astype(np.int64) if subset.is_classification else np.asarray(subset.y)
    np.savez(buf, x=subset.x.astype(np.float32), y=y,
             condition=subset.condition, split=subset.split, ids=subset.ids,
             classes=np.array(dataset.classes))
    return atomic_write_bytes(path, buf.getvalue())
