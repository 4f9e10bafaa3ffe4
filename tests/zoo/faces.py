"""A calibration set for BlazeFace that holds faces, under every built-in condition.

    python -m tests.zoo.faces          # builds it once; prints the folder dataset's path

The zoo's own calibration split (tests/zoo/fetch.py) is 24 random crops of 14 stock photos: the
cameraman's and the astronaut's faces appear in a few, at whatever scale the crop gave them, in
daylight only. A face detector's score head then sees almost no positive logit and no dark or
washed-out frame. This set is what a data scientist would calibrate a face detector with, from the
same pinned sources (scikit-image 0.26.0's wheel, scikit-learn's bundled photos):

* 24 random crops of the 14 photos, as the zoo's (another seed);
* 12 crops of ``astronaut.png`` around her face (sides 200-512 px of the 512 px photo, the face
  kept inside, every second one mirrored);
* 12 faces of ``lfw_subset.npy`` (scikit-image's 25x25 grey Labeled Faces in the Wild sample, its
  first 100 entries are faces) scaled to 40-100 px and pasted at a random place on crops of
  face-free photos (coffee, chelsea, brick, motorcycle, rocket, china, flower, horse);

each of the 48 at daylight and under ``low-light``, ``overexposed``, ``motion-blur`` and
``sensor-noise`` (severity 3, seed 1; the zoo's test split uses seed 0 on other crops): 240 images
128x128, ``<zoo>/blazeface-faces/data/calibration/<condition>/image/*.png``. The test crops are
other crops of the same photos, as for every zoo model. The float model sees a face (a score logit
above 0) in every astronaut and LFW image at daylight.
"""

from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path

from tests.zoo.fetch import CONDITIONS, _crops, _photos, build_once, wheel, zoo_dir

NAME = "blazeface-faces"
VERSION = 1            # bump when the images change
SIZE = (128, 128)
N_CROPS, N_ASTRONAUT, N_LFW = 24, 12, 12
BACKGROUNDS = ("coffee.png", "chelsea.png", "brick.png", "motorcycle_left.png", "rocket.jpg", "china.jpg",
               "flower.jpg", "horse.png")
SEVERITY, SEED = 3, 1


def _lfw_faces():
    import numpy as np
    with zipfile.ZipFile(wheel("scikit-image==0.26.0")) as archive:
        faces = np.load(io.BytesIO(archive.read("skimage/data/lfw_subset.npy")))
    return faces[:100]                           # the first 100 of the 200 are faces


def _astronaut(n: int, rng):
    import numpy as np
    from PIL import Image
    (_, photo), = _photos(("astronaut.png",))
    out = []
    for k in range(n):                           # her face: rows ~20..220, columns ~150..340
        side = int(rng.uniform(200, 512))
        cy, cx = 110 + int(rng.integers(-30, 30)), 245 + int(rng.integers(-30, 30))
        top = int(np.clip(cy - side // 2 + rng.integers(-side // 6, side // 6 + 1), 0, 512 - side))
        left = int(np.clip(cx - side // 2 + rng.integers(-side // 6, side // 6 + 1), 0, 512 - side))
        crop = (photo[top:top + side, left:left + side] * 255).round().astype(np.uint8)
        image = np.asarray(Image.fromarray(crop).resize(SIZE[::-1], Image.BILINEAR), np.float32) / 255.0
        out.append(image[:, ::-1] if k % 2 else image)
    return out


def _lfw_pasted(n: int, rng):
    import numpy as np
    from PIL import Image
    faces = _lfw_faces()
    out = []
    for _, background in _crops(_photos(BACKGROUNDS), n, SIZE, rng):
        face = faces[int(rng.integers(0, len(faces)))]
        side = int(rng.uniform(40, 100))
        grey = Image.fromarray((np.repeat(face[..., None], 3, -1) * 255).round().astype(np.uint8))
        pasted = np.asarray(grey.resize((side, side), Image.BILINEAR), np.float32) / 255.0
        y, x = (int(v) for v in rng.integers(0, SIZE[0] - side + 1, 2))
        image = background.copy()
        image[y:y + side, x:x + side] = pasted
        out.append(image)
    return out


def images():
    """``[(name, float32 HxWx3 in [0, 1])]``: the 48 daylight images."""
    import numpy as np

    from tests.zoo.fetch import SKIMAGE_PHOTOS, SKLEARN_PHOTOS
    rng = np.random.default_rng(2028)
    crops = [(f"crop_{Path(n).stem}", im) for n, im in _crops(_photos(SKIMAGE_PHOTOS + SKLEARN_PHOTOS), N_CROPS, SIZE, rng)]
    return (crops + [("astronaut_face", im) for im in _astronaut(N_ASTRONAUT, rng)]
            + [("lfw_face", im) for im in _lfw_pasted(N_LFW, rng)])


def _build(root: Path) -> None:
    import numpy as np
    from PIL import Image

    from workbench.data.conditions import apply_condition
    named = images()
    clean = np.stack([im for _, im in named])
    for condition in CONDITIONS:
        batch = clean if condition == "daylight" else apply_condition(clean, condition, severity=SEVERITY, seed=SEED)
        folder = root / "data" / "calibration" / condition / "image"
        folder.mkdir(parents=True)
        for k, (name, _) in enumerate(named):
            pixels = (np.clip(batch[k], 0, 1) * 255).round().astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{k:03d}_{name}.png")
    (root / "zoo.json").write_text(json.dumps({"name": NAME, "version": VERSION, "images": len(named) * len(CONDITIONS),
                                               "conditions": list(CONDITIONS)}, indent=2) + "\n")


def calibration_faces() -> Path:
    """The folder dataset (``<zoo>/blazeface-faces/data``), built once (atomically) and reused."""
    folder = zoo_dir() / NAME
    build_once(folder, VERSION, _build)
    return folder / "data"


if __name__ == "__main__":
    print(calibration_faces())
    sys.exit(0)
