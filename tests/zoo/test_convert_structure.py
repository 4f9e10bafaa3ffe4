"""The zoo's real models keep their structure through quantize (issue: no added TRANSPOSE, depthwise stays
depthwise, ceil-mode pools without float32-lowest padding), with the structural diff saying so."""

from __future__ import annotations

import numpy as np
import pytest

# name -> (depthwise convs in the source, mark): the conversion of ppocr-cls is ~1 minute, the others more
CASES = [pytest.param("ppocr-cls", 11, marks=[pytest.mark.zoo, pytest.mark.slow]),
         pytest.param("blazeface", 16, marks=[pytest.mark.zoo, pytest.mark.heavy]),
         pytest.param("ppocr-det", 14, marks=[pytest.mark.zoo, pytest.mark.heavy]),
         pytest.param("onet", 0, marks=[pytest.mark.zoo, pytest.mark.heavy])]


@pytest.mark.parametrize("name, depthwise", CASES)
def test_zoo_model_keeps_its_structure(name, depthwise):
    from tests.zoo.fetch import fetch
    from workbench.data.loaders import load_dataset
    from workbench.findings import findings_for
    from workbench.quantize.engine import quantize
    entry = fetch(name)
    x = np.asarray(load_dataset(entry.data).select(split="calibration").x, np.float32)
    q = quantize(entry.model, "a8w8_pc", x)
    st = q.structure
    assert st["compared"] and st["depthwise"] == {"source": depthwise, "int8": depthwise}, st
    assert st["transposes_added"] == 0 and st["grouped_conv"]["int8"] == 0, st
    assert "PADV2" not in q.op_summary and q.full_integer
    codes = {f.code for f in findings_for(q)}
    assert "convert.depthwise-lost" not in codes
    if name == "onet":          # the INT8 model follows its input (ceil-mode pools were padded with -3.4e38)
        from workbench.models.predict import load_predictor
        out = load_predictor(q.path).predict_outputs(x[:6])
        assert all(np.ptp(o, axis=0).max() > 0 for o in out)


SHARE_CASES = [pytest.param("ppocr-cls", marks=[pytest.mark.zoo, pytest.mark.slow]),
               pytest.param("blazeface", marks=[pytest.mark.zoo, pytest.mark.heavy]),
               pytest.param("ppocr-det", marks=[pytest.mark.zoo, pytest.mark.heavy])]


@pytest.mark.parametrize("name", SHARE_CASES)
def test_no_op_the_conversion_added_runs_on_a_cpu(name):
    """Issue 22: the NPU share is at least the source graph's own ops' share on every target (rule tables), i.e.
    no op of a type the conversion added is placed on a CPU: the PADs before stride-2 convolutions (PP-OCR) are
    folded into the convolutions, BlazeFace's requantizing QUANTIZEs into its heads' convolutions."""
    from tests.zoo.fetch import fetch
    from workbench.data.loaders import load_dataset
    from workbench.placement.analyze import analyze_placement
    from workbench.quantize.engine import quantize
    from workbench.targets import target_ids
    entry = fetch(name)
    x = np.asarray(load_dataset(entry.data).select(split="calibration").x, np.float32)
    q = quantize(entry.model, "a8w8_pc", x)
    added = q.structure["added"]
    assert not {"PAD", "QUANTIZE", "TRANSPOSE"} & set(added), added
    for target in target_ids():
        report = analyze_placement(q.path, target, use_vela=False, use_converter=False)
        on_cpu = [f"{o.type} #{o.index}" for o in report.ops if o.placement == "CPU" and o.type in added]
        assert not on_cpu, (target, on_cpu)
