"""A small PyTorch CNN trained on a folder dataset it writes, exported to ONNX (NCHW, opset 17).

Made here, no download: three colour classes (red, green, blue blobs on noise) at 32x32 RGB under
``<root>/<split>/<condition>/<class>/*.png`` with two conditions (``daylight`` and a darker ``dusk``),
and a CNN (conv-BN-ReLU, depthwise conv, ReLU6, global pooling, linear) trained for a few epochs to
near 100 % (so that accuracy numbers mean something).  ``torch`` is a test-only dependency (the
``dev`` extra); it is imported inside the functions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CLASSES = ("blue", "green", "red")
SIZE = 32


def _image(rng: np.random.Generator, label: int, dark: bool) -> np.ndarray:
    img = rng.uniform(0.0, 0.35, (SIZE, SIZE, 3))
    cy, cx = rng.integers(8, SIZE - 8, 2)
    r = rng.integers(5, 9)
    yy, xx = np.mgrid[:SIZE, :SIZE]
    mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    channel = {0: 2, 1: 1, 2: 0}[label]
    img[mask, channel] = rng.uniform(0.75, 1.0)
    if dark:
        img *= 0.6
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)


def write_folder_dataset(root: Path, *, per_class: int = 12, seed: int = 0) -> Path:
    """``root/{calibration,test}/{daylight,dusk}/{blue,green,red}/NNN.png``."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    for split, n in (("calibration", per_class), ("test", per_class)):
        for cond in ("daylight", "dusk"):
            for label, name in enumerate(CLASSES):
                folder = root / split / cond / name
                folder.mkdir(parents=True, exist_ok=True)
                for i in range(n):
                    Image.fromarray(_image(rng, label, cond == "dusk")).save(folder / f"{i:03d}.png")
    return root


def train_and_export(path: Path, *, seed: int = 0, steps: int = 150) -> Path:
    """Train the CNN on freshly drawn images (same generator as the dataset) and export ONNX."""
    import warnings

    import torch
    from torch import nn
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed + 1)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU6(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, len(CLASSES)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        labels = rng.integers(0, len(CLASSES), 32)
        x = np.stack([_image(rng, int(k), bool(rng.integers(0, 2))) for k in labels]).astype(np.float32) / 255
        xb = torch.from_numpy(x.transpose(0, 3, 1, 2).copy())
        loss = nn.functional.cross_entropy(model(xb), torch.from_numpy(labels))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.zeros(1, 3, SIZE, SIZE), str(path), input_names=["image"],
                          output_names=["logits"], opset_version=17, dynamo=False)
    return path
