"""Per-output fidelity statistics and task metrics on arrays with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import EvaluationError
from workbench.evaluate.fidelity import FidelityRow, fidelity_rows, output_fidelity, pair_outputs, text
from workbench.evaluate.metrics import metric_values, pck, resolve_metric, top1
from workbench.evaluate.stats import bootstrap_indices


@pytest.fixture
def idx():
    return bootstrap_indices(400, 300, seed=0)


def test_sqnr_of_known_noise(idx):
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(400, 16))
    noisy = ref + rng.normal(scale=0.1, size=ref.shape)             # signal 1, noise 0.01: 20 dB
    stats = output_fidelity(ref, noisy, idx)
    assert stats["sqnr_db"] == pytest.approx(20.0, abs=0.3)
    assert stats["sqnr_ci_low"] < stats["sqnr_db"] < stats["sqnr_ci_high"]
    assert 0.99 < stats["cosine"] < 1.0
    assert stats["max_abs_error"] == pytest.approx(np.abs(noisy - ref).max())
    assert stats["topk"] == ()                                         # not class scores


def test_identical_outputs_and_zero_reference(idx):
    ref = np.random.default_rng(1).normal(size=(400, 4))
    same = output_fidelity(ref, ref.copy(), idx)
    assert same["sqnr_db"] == 200.0 and same["cosine"] == pytest.approx(1.0) and same["max_abs_error"] == 0.0
    zero = output_fidelity(np.zeros((400, 4)), ref, idx)
    assert zero["sqnr_db"] is None


def test_topk_agreement_for_class_scores(idx):
    rng = np.random.default_rng(2)
    ref = rng.normal(size=(400, 10))
    cand = ref.copy()
    top = ref.argmax(axis=1)
    second = np.argsort(-ref, axis=1)[:, 1]
    swap = np.arange(400) < 100                                        # a quarter: top-1 becomes second
    cand[swap, top[swap]], cand[swap, second[swap]] = ref[swap, second[swap]], ref[swap, top[swap]]
    stats = output_fidelity(ref, cand, idx, class_scores=True)
    assert stats["topk"] == (1, 5)
    assert stats["topk_agreement"][0] == pytest.approx(0.75) and stats["topk_agreement"][1] == 1.0
    assert stats["topk_ci_low"][0] < 0.75 < stats["topk_ci_high"][0]


def test_class_scores_per_position_count_each_position(idx):
    """A CTC text recogniser's [positions, classes] scores (PP-OCRv4 rec: [40, 6625]): top-1 agreement is the
    share of positions whose class survives, not the one top value of all 40 x 6625 scores."""
    rng = np.random.default_rng(4)
    ref = rng.normal(size=(400, 8, 12))
    cand = ref.copy()
    top = ref.argmax(axis=2)
    second = np.argsort(-ref, axis=2)[:, :, 1]
    n, pos = np.meshgrid(np.arange(400), np.arange(8), indexing="ij")
    swap = pos < 2                                                     # 2 of 8 positions lose their class
    cand[n[swap], pos[swap], top[swap]] = ref[n[swap], pos[swap], second[swap]]
    cand[n[swap], pos[swap], second[swap]] = ref[n[swap], pos[swap], top[swap]]
    layout = [("probs", (8, 12))]
    (row,) = fidelity_rows("day", "int8", [ref.reshape(400, -1)], [cand.reshape(400, -1)], idx, names=("probs",),
                           kinds=("class_scores",), reference_layout=layout, candidate_layout=layout)
    assert row.topk[0] == 1 and row.topk_agreement[0] == pytest.approx(0.75)
    assert row.topk_ci_low[0] == pytest.approx(0.75) and row.topk_agreement[1] == 1.0   # every sample: 6 of 8
    flat = output_fidelity(ref.reshape(400, -1), cand.reshape(400, -1), idx, class_scores=True)
    assert flat["topk_agreement"][0] != pytest.approx(0.75)           # one vector: not what a decoder reads


def test_rows_pair_reordered_outputs_and_render(idx):
    rng = np.random.default_rng(3)
    ref = [rng.normal(size=(400, 10)), rng.normal(size=(400, 6))]
    cand = [ref[1] + 0.01, ref[0]]                                     # a converter swapped the outputs
    assert pair_outputs(ref, cand) == [(0, 1), (1, 0)]
    rows = fidelity_rows("day", "int8", ref, cand, idx, names=("logits", "kp"), kinds=("class_scores", "keypoints"))
    assert [r.output for r in rows] == ["logits", "kp"] and rows[0].topk_agreement[0] == 1.0
    assert FidelityRow.from_dict(rows[1].to_dict()) == rows[1]
    assert "kp (keypoints, 6)" in text(rows)
    with pytest.raises(EvaluationError, match="the FP32 model has 2 output\\(s\\) but 'int8' has 1"):
        pair_outputs(ref, cand[:1], "int8")
    with pytest.raises(EvaluationError, match="do not match the FP32"):
        pair_outputs(ref, [ref[0], rng.normal(size=(400, 5))])


def test_builtin_metrics():
    scores = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    np.testing.assert_array_equal(top1(scores, np.array([1, 1, 1])), [1, 0, 1])
    true = np.array([[[0.5, 0.5], [0.1, 0.1]]])
    pred = np.array([[0.5, 0.52, 0.3, 0.1]])                            # first within 0.05, second not
    assert pck(pred, true)[0] == 0.5
    with pytest.raises(EvaluationError, match="is this a keypoint model"):
        pck(np.zeros((1, 3)), true)


def test_custom_metric_by_module_name(tmp_path, monkeypatch):
    (tmp_path / "my_task.py").write_text(
        "import numpy as np\n"
        "def error(outputs, labels):\n    return -np.abs(outputs[:, 0] - labels)\n"
        "def total(outputs, labels):\n    return float(np.mean(outputs[:, 0] > 0))\n"
        "def broken(outputs, labels):\n    raise RuntimeError('boom')\n")
    monkeypatch.chdir(tmp_path)
    name, fn = resolve_metric("my_task:error")
    assert name == "my_task:error"
    values = metric_values(name, fn, [np.array([[1.0], [2.0]])], np.array([1.0, 0.0]), "here")
    np.testing.assert_array_equal(values, [0.0, -2.0])
    assert metric_values("t", resolve_metric("my_task:total")[1], [np.array([[1.0], [-1.0]])], np.zeros(2), "x") == 0.5
    with pytest.raises(EvaluationError, match="metric 'my_task:broken' failed on here: RuntimeError: boom"):
        metric_values("my_task:broken", resolve_metric("my_task:broken")[1], [np.zeros((2, 1))], np.zeros(2), "here")
    with pytest.raises(EvaluationError, match="cannot import module 'nope'"):
        resolve_metric("nope:f")
    with pytest.raises(EvaluationError, match="has no function 'missing'"):
        resolve_metric("my_task:missing")
    with pytest.raises(EvaluationError, match="must be one of 'top1', 'pck'.* or 'module:function'"):
        resolve_metric("accuracy")
    with pytest.raises(EvaluationError, match="expected one value per sample"):
        metric_values("m", lambda o, y: np.zeros(5), [np.zeros((2, 1))], np.zeros(2), "x")


def test_nchw_heatmaps_against_nhwc_are_compared_in_one_layout(idx):
    """A PyTorch model's NCHW [17, 16, 16] output against its converted model's NHWC [16, 16, 17]:
    compared element by element (the old code) a near-perfect model scored about -3 dB."""
    from workbench.evaluate.fidelity import layout_permutation
    rng = np.random.default_rng(4)
    heat = rng.normal(size=(400, 17, 16, 16)).astype(np.float32)
    logits = rng.normal(size=(400, 5))
    noisy = heat + rng.normal(scale=0.01, size=heat.shape)             # signal 1, noise 1e-4: 40 dB
    want = 10 * np.log10((heat ** 2).sum() / ((noisy - heat) ** 2).sum())
    nhwc = noisy.transpose(0, 2, 3, 1).reshape(400, -1)
    ref = [heat.reshape(400, -1), logits]
    cand = [nhwc, logits]
    flat = fidelity_rows("day", "int8", ref, cand, idx, names=("heatmaps", "logits"), kinds=("other", "class_scores"))
    assert flat[0].sqnr_db < 0 and flat[0].cosine < 0.8                # the old answer: noise
    rows = fidelity_rows("day", "int8", ref, cand, idx, names=("heatmaps", "logits"), kinds=("other", "class_scores"),
                         reference_layout=[("heatmaps", (17, 16, 16)), ("logits", (5,))],
                         candidate_layout=[("heatmaps", (16, 16, 17)), ("logits", (5,))])
    assert rows[0].sqnr_db == pytest.approx(want, abs=0.01) and rows[0].cosine > 0.999
    assert rows[0].permutation == (2, 0, 1) and rows[0].shape == (17, 16, 16)
    assert rows[1].sqnr_db == 200.0 and rows[1].permutation == ()
    assert layout_permutation((17, 16, 16), (16, 16, 17)) == (2, 0, 1)
    assert layout_permutation((4, 10), (10, 4)) == (1, 0)
    assert layout_permutation((4, 10), (4, 11)) is None


def test_outputs_paired_by_name_before_position(idx):
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(400, 6)), rng.normal(size=(400, 6))        # same size: position alone would pair a-b
    rows = fidelity_rows("day", "int8", [a, b], [b, a], idx, names=("a", "b"), kinds=("other", "other"),
                         reference_layout=[("a", (6,)), ("b", (6,))], candidate_layout=[("b", (6,)), ("a", (6,))])
    assert [r.sqnr_db for r in rows] == [200.0, 200.0]


def test_scalar_outputs_and_all_zero_vectors(idx):
    rng = np.random.default_rng(6)
    score = rng.normal(size=(400, 1))
    stats = output_fidelity(score, score + 0.1, idx)
    assert stats["cosine"] is None and stats["mean_abs_error"] == pytest.approx(0.1)   # no sign-agreement "cosine"
    ref = rng.normal(size=(400, 8))
    ref[:200] = 0.0                                                      # half the samples: all zeros in both
    cand = ref.copy()
    cand[200:] = -cand[200:]                                             # the rest: exactly opposite
    stats = output_fidelity(ref, cand, idx)
    assert stats["cosine"] == pytest.approx(-1.0)                        # not (1 + -1) / 2 = 0
    both_zero = output_fidelity(np.zeros((400, 8)), np.zeros((400, 8)), idx)
    assert both_zero["cosine"] is None
    row = FidelityRow(condition="day", model="int8", output="score", output_index=0, kind="other",
                      **output_fidelity(score, score + 0.1, idx))
    assert "n/a (scalar)" in text([row]) and "mean |err| 0.1" in text([row])


def test_a_recorded_permutation_settles_what_shapes_cannot(idx, tmp_path):
    """[4, 4, 4] looks the same channels-first and channels-last: the conversion record says which."""
    import json

    from workbench.evaluate.fidelity import recorded_permutations
    rng = np.random.default_rng(7)
    cube = rng.normal(size=(400, 4, 4, 4))
    nhwc = cube.transpose(0, 2, 3, 1).reshape(400, -1)
    layout = [("cube", (4, 4, 4))]
    guessed = fidelity_rows("day", "int8", [cube.reshape(400, -1)], [nhwc], idx, names=("cube",), kinds=("other",),
                            reference_layout=layout, candidate_layout=layout)
    assert guessed[0].sqnr_db < 3                                       # compared as is: noise

    class Layout(list):
        path = tmp_path / "model.tflite"
    (tmp_path / "model_manifest.json").write_text(json.dumps({"conversion": {"transposed_outputs": ["cube"]}}))
    perms = recorded_permutations(Layout(layout), layout)
    assert perms == [(2, 0, 1)]
    rows = fidelity_rows("day", "int8", [cube.reshape(400, -1)], [nhwc], idx, names=("cube",), kinds=("other",),
                         reference_layout=layout, candidate_layout=layout, permutations=perms)
    assert rows[0].sqnr_db == 200.0 and rows[0].permutation == (2, 0, 1)


def test_a_collapsed_output_is_a_finding_naming_output_and_condition(idx):
    """SQNR under 10 dB (or cosine under 0.9) on a condition: accuracy.output-collapsed names the output and
    the condition; a good output on another condition, or a good candidate, gives none."""
    import dataclasses

    from tests.evaluate.test_gate import make_report
    from workbench.evaluate.findings import findings
    rng = np.random.default_rng(4)
    ref = [rng.normal(size=(400, 16)), rng.normal(size=(400, 1)) * 50]
    good = [ref[0] + 0.01 * rng.normal(size=ref[0].shape), ref[1] + 0.05 * rng.normal(size=ref[1].shape)]
    noisy = [good[0], ref[1] + 30 * rng.normal(size=ref[1].shape)]          # about 4 dB on the scores
    kinds = ("boxes", "other")
    rows = (fidelity_rows("daylight", "pc", ref, good, idx, names=("regressors", "classificators"), kinds=kinds)
            + fidelity_rows("fog", "pc", ref, noisy, idx, names=("regressors", "classificators"), kinds=kinds))
    report = dataclasses.replace(make_report({"daylight": {"fp32": 0.9}, "fog": {"fp32": 0.9}}), fidelity=tuple(rows))
    found = [f for f in findings(report, target="imx93") if f.code == "accuracy.output-collapsed"]
    assert len(found) == 1 and found[0].severity == "error"
    assert "'classificators'" in found[0].message and "fog SQNR" in found[0].message
    assert list(found[0].evidence["conditions"]) == ["fog"]
    clean = dataclasses.replace(report, fidelity=tuple(rows[:2]))
    assert [f for f in findings(clean) if f.code == "accuracy.output-collapsed"] == []
