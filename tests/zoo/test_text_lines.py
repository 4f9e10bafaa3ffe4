"""The text sets of tests/zoo/text_lines.py hold what PaddleOCR's models were made for: the float PP-OCRv4
recognizer (from the pinned rapidocr wheel) reads words on every rec crop, far more often than on the zoo's
direction-classifier crops, and the detector's map finds text on every det crop."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.zoo

REC_MEMBER = "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx"


def _bgr_mean_std(folder, size):
    import numpy as np
    from PIL import Image
    files = sorted(folder.glob("*.png"))
    x = np.stack([np.asarray(Image.open(f).convert("RGB").resize(size[::-1], Image.BILINEAR), np.float32) / 255.0
                  for f in files])
    return ((x[..., ::-1] - 0.5) / 0.5).transpose(0, 3, 1, 2).astype(np.float32)     # card: bgr, mean/std 0.5, NCHW


def _read(session, x, chars):
    """Greedy CTC decoding: (the strings, the fraction of time steps that are not the blank)."""
    import numpy as np
    probs = session.run(None, {session.get_inputs()[0].name: x})[0]
    steps = probs.argmax(axis=2)
    texts = []
    for row in steps:
        keep = [t for k, t in enumerate(row) if t != 0 and (k == 0 or t != row[k - 1])]
        texts.append("".join(chars[t] for t in keep))
    return texts, float(np.mean(steps != 0))


def test_the_recognizer_reads_the_rec_crops_and_the_detector_finds_text(tmp_path):
    import numpy as np
    import onnxruntime as ort

    from tests.zoo.fetch import CONDITIONS, N_CALIBRATION, _member, fetch, wheel
    from tests.zoo.text_lines import DET_SIZE, REC_SIZE, text_sets
    sets = text_sets()
    for kind in ("rec", "det"):
        assert len(list((sets[kind] / "calibration" / "daylight" / "image").glob("*.png"))) == N_CALIBRATION
        assert {p.name for p in (sets[kind] / "test").iterdir()} == set(CONDITIONS)

    path = tmp_path / "rec.onnx"
    path.write_bytes(_member(wheel("rapidocr-onnxruntime==1.4.4"), REC_MEMBER))
    rec = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    chars = ["<blank>"] + rec.get_modelmeta().custom_metadata_map["character"].splitlines() + [" "]
    texts, used = _read(rec, _bgr_mean_std(sets["rec"] / "test" / "daylight" / "image", REC_SIZE), chars)
    assert used > 0.2 and all(sum(c.isalpha() for c in t) >= 5 for t in texts), (used, texts)
    words = {w.strip(".,:") for t in texts for w in t.split()}
    assert words & {"markers", "segmentation", "background", "histogram", "pixels", "either", "label"}, texts
    cls = fetch("ppocr-cls")                                     # crops of the same photos, not text lines
    _, used_cls = _read(rec, _bgr_mean_std(cls.data / "test" / "daylight" / "0", REC_SIZE), chars)
    assert used > 3 * used_cls, (used, used_cls)

    det = ort.InferenceSession(str(fetch("ppocr-det").model), providers=["CPUExecutionProvider"])
    x = _bgr_mean_std(sets["det"] / "test" / "daylight" / "image", DET_SIZE)
    text_map = det.run(None, {det.get_inputs()[0].name: x})[0]
    assert all(float(np.mean(m > 0.3)) > 0.02 for m in text_map), [float(np.mean(m > 0.3)) for m in text_map]
