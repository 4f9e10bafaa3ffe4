"""Real text for PaddleOCR's recognizer and detector: crops of a photographed book page, under every condition.

    python -m tests.zoo.text_lines     # builds them once; prints the two folder datasets' paths

The zoo's PaddleOCR sets (tests/zoo/fetch.py) are random crops of scikit-image's ``page.png`` and
``text.png`` at the direction classifier's or the detector's aspect: a crop may hold half a line, a
margin or the hand-written, tilted formulas of ``text.png``. PP-OCRv4's recognizer reads one line of
printed text at 48x320; judged on anything else its answer is the CTC blank (97-100% of the time
steps on the classifier's crops), and its INT8 fidelity says little. These sets hold what it was
made for, from the same pinned source (scikit-image 0.26.0's wheel):

* ``page.png`` (384x191, a photographed book page: a heading, five lines of body text, a line of
  code) is cut into its text lines by the row profile of its ink (dark against the page's own
  local brightness), and each line into words by the column profile;
* **rec** (48x320, the recognizer's input): runs of whole words of one line, as wide as the
  recognizer's aspect allows (drawn between 4:1 and 7.5:1; at least 3:1 and 8% ink, so never one
  short word stretched nor a rule), with a few pixels of jitter: 24
  daylight crops for calibration, 8 others for test under each built-in condition (``daylight``,
  ``low-light``, ``overexposed``, ``motion-blur``, ``sensor-noise``; severity 3, seed 0);
* **det** (96x128, the zoo detector's input): crops of the page at 0.45-1.0 of the largest crop,
  each holding at least 4% ink, the same counts.

``<zoo>/ppocr-text/{rec,det}/data/<split>/<condition>/image/*.png``, built under a temporary name
and renamed (``fetch.build_folder``), never committed. No labels: the fidelity of an INT8 model is
judged against its float model on these images (tests/zoo/test_text_lines.py checks the float
recognizer reads characters on them, and the detector finds text).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.zoo.fetch import CONDITIONS, N_CALIBRATION, N_TEST_PER_CONDITION, build_once, zoo_dir

NAME = "ppocr-text"
VERSION = 2                      # bump when the images change
PAGE = "page.png"
REC_SIZE, DET_SIZE = (48, 320), (96, 128)
INK_CONTRAST = 40                # an ink pixel: this much darker than the page's local brightness (0..255)
SEVERITY, SEED = 3, 0


def page():
    """``page.png`` as float32 HxW in [0, 1] and its ink mask (bool HxW)."""
    import numpy as np
    from PIL import Image, ImageFilter

    from tests.zoo.fetch import _photos
    (_, rgb), = _photos((PAGE,))
    grey = Image.fromarray((rgb.mean(axis=2) * 255).round().astype(np.uint8))
    paper = grey.filter(ImageFilter.MaxFilter(9)).filter(ImageFilter.GaussianBlur(6))   # the page without ink
    ink = (np.asarray(paper, np.float32) - np.asarray(grey, np.float32)) > INK_CONTRAST
    return np.asarray(grey, np.float32) / 255.0, ink


def _runs(profile, threshold: float, min_length: int) -> list[tuple[int, int]]:
    """``[(start, stop)]`` of the runs where ``profile > threshold``, at least ``min_length`` long."""
    runs, start = [], None
    for i, value in enumerate(list(profile) + [0]):
        if value > threshold and start is None:
            start = i
        elif value <= threshold and start is not None:
            if i - start >= min_length:
                runs.append((start, i))
            start = None
    return runs


def lines(ink) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """``[(top, bottom, [(left, right) of each word])]``: the page's text lines (rows where the ink
    passes 8% of the busiest row's, at least 6 rows: the heading's rule is one) and their words
    (column runs of ink, gaps under 5 px closed)."""
    import numpy as np
    rows = ink.sum(axis=1)
    out = []
    for top, bottom in _runs(rows, 0.08 * rows.max(), 6):
        top, bottom = max(0, top - 4), min(ink.shape[0], bottom + 4)            # ascenders and descenders
        columns = ink[top:bottom].sum(axis=0)
        closed = np.convolve(columns > 0, np.ones(5), mode="same") > 0          # letters of a word join
        words = [(a, b) for a, b in _runs(closed.astype(float), 0.5, 3)]
        if words:
            out.append((top, bottom, words))
    return out


def rec_crops(n: int, rng, grey=None, ink=None):
    """``n`` crops of whole words of one line, resized to ``REC_SIZE`` (float32 HxWx3 in [0, 1])."""
    import numpy as np
    from PIL import Image
    if grey is None:
        grey, ink = page()
    found = lines(ink)
    height, width = REC_SIZE
    out = []
    while len(out) < n:
        top, bottom, words = found[int(rng.integers(len(found)))]
        first = last = int(rng.integers(len(words)))
        wide = rng.uniform(4.0, 7.5) * (bottom - top)          # the widest run of words this crop takes
        while last + 1 < len(words) and words[last + 1][1] - words[first][0] <= wide:
            last += 1
        while first > 0 and words[last][1] - words[first - 1][0] <= wide:      # at a line's end: grow left
            first -= 1
        jitter = rng.integers(-2, 3, 4)
        y0, y1 = max(0, top + int(jitter[0])), min(grey.shape[0], bottom + int(jitter[1]))
        x0 = max(0, words[first][0] - 4 + int(jitter[2]))
        x1 = min(grey.shape[1], words[last][1] + 4 + int(jitter[3]))
        if x1 - x0 < 3 * (y1 - y0) or ink[y0:y1, x0:x1].mean() < 0.08:     # a short line's end, a rule
            continue
        crop = Image.fromarray((grey[y0:y1, x0:x1] * 255).round().astype(np.uint8))
        image = np.asarray(crop.resize((width, height), Image.BILINEAR), np.float32) / 255.0
        out.append(np.repeat(image[..., None], 3, axis=2))
    return out


def det_crops(n: int, rng, grey=None, ink=None):
    """``n`` crops of the page with the detector's aspect holding at least 4% ink, resized to ``DET_SIZE``."""
    import numpy as np
    from PIL import Image
    if grey is None:
        grey, ink = page()
    height, width = DET_SIZE
    out = []
    while len(out) < n:
        ch = int(min(grey.shape[0], grey.shape[1] * height / width) * rng.uniform(0.45, 1.0))
        cw = int(ch * width / height)
        top, left = int(rng.integers(0, grey.shape[0] - ch + 1)), int(rng.integers(0, grey.shape[1] - cw + 1))
        if ink[top:top + ch, left:left + cw].mean() < 0.04:
            continue
        crop = Image.fromarray((grey[top:top + ch, left:left + cw] * 255).round().astype(np.uint8))
        image = np.asarray(crop.resize((width, height), Image.BILINEAR), np.float32) / 255.0
        out.append(np.repeat(image[..., None], 3, axis=2))
    return out


def _write(root: Path, crops, rng) -> None:
    import numpy as np
    from PIL import Image

    from workbench.data.conditions import apply_condition

    def save(split: str, condition: str, images) -> None:
        folder = root / "data" / split / condition / "image"
        folder.mkdir(parents=True)
        for k, image in enumerate(images):
            Image.fromarray((np.clip(image, 0, 1) * 255).round().astype(np.uint8)).save(folder / f"{k:03d}_page.png")

    save("calibration", "daylight", crops(N_CALIBRATION, rng))
    clean = np.stack(crops(N_TEST_PER_CONDITION, rng))
    for condition in CONDITIONS:
        save("test", condition, clean if condition == "daylight"
             else apply_condition(clean, condition, severity=SEVERITY, seed=SEED))


def _build(root: Path) -> None:
    import numpy as np
    grey, ink = page()
    for kind, crops, seed in (("rec", rec_crops, 48320), ("det", det_crops, 96128)):
        _write(root / kind, lambda n, rng, crops=crops: crops(n, rng, grey, ink), np.random.default_rng(seed))
    (root / "zoo.json").write_text(json.dumps({
        "name": NAME, "version": VERSION, "source": f"scikit-image==0.26.0 skimage/data/{PAGE}",
        "lines": len(lines(ink)), "calibration": N_CALIBRATION, "test": N_TEST_PER_CONDITION * len(CONDITIONS),
        "conditions": list(CONDITIONS)}, indent=2) + "\n")


def text_sets() -> dict[str, Path]:
    """``{"rec": folder dataset, "det": folder dataset}`` under ``<zoo>/ppocr-text``, built once (atomically)."""
    folder = zoo_dir() / NAME
    build_once(folder, VERSION, _build)
    return {kind: folder / kind / "data" for kind in ("rec", "det")}


if __name__ == "__main__":
    for path in text_sets().values():
        print(path)
    sys.exit(0)
