"""The findings catalogue: every finding code, defined once (:data:`CATALOGUE` of :class:`CatalogueEntry`):
its severity, stage, title, what it means and what to do.  ``workbench findings --docs`` renders it into
``docs/findings.md``; :mod:`workbench.findings` holds the findings themselves."""

from __future__ import annotations

from dataclasses import dataclass

from .vocab import SEVERITIES, STAGES

#: the pipeline stages (vocab.STAGES) and the steps around them that notice findings too
FINDING_STAGES = ("run", "data", "model", "convert", *STAGES, "board", "deploy")


@dataclass(frozen=True)
class CatalogueEntry:
    """What one finding code means, defined once."""

    code: str
    severity: str
    stage: str
    title: str
    meaning: str
    action: str


def _entries(*rows: CatalogueEntry) -> dict[str, CatalogueEntry]:
    out = {}
    for entry in rows:
        if entry.severity not in SEVERITIES or entry.stage not in FINDING_STAGES:
            raise ValueError(f"catalogue entry {entry.code}: bad severity or stage")
        if not entry.code.startswith(entry.stage + "."):
            raise ValueError(f"catalogue entry {entry.code}: the code must start with its stage")
        out[entry.code] = entry
    return out


#: every finding code: code -> (severity, stage, title, what it means, what to do)
CATALOGUE: dict[str, CatalogueEntry] = _entries(
    # -- run -------------------------------------------------------------------------------------
    CatalogueEntry("run.unreadable-record", "error", "run", "A stage record cannot be read",
     "A stage's record in the run folder (<target>/<stage>.json) is truncated, edited or not a record of "
     "that stage: the findings, accuracy and placement that stage would show are unknown, not absent.",
     "Run the stage again (or the batch with the same --out); never gate on a run with this finding."),
    # -- model -----------------------------------------------------------------------------------
    CatalogueEntry("model.dynamic-batch", "warning", "model", "Dynamic batch dimension",
     "A model input has a dynamic (None / -1) dimension. The NPU compilers and delegates expect "
     "static shapes; shape-dependent ops leave the NPU or the model is refused.",
     "Export the model with a fixed input shape and batch 1."),
    CatalogueEntry("model.input-contract", "error", "model", "Input contract looks wrong",
     "The FP32 model is near chance accuracy on the held-out data: the images it is fed do not "
     "match what it was trained on (scale 0-1 vs 0-255, channel order, normalisation, resize).",
     "Check the dataset's preprocessing against the model's training pipeline before quantizing."),
    # -- calibration -----------------------------------------------------------------------------
    CatalogueEntry("calibration.condition-missing", "warning", "calibration", "Deployment condition missing",
     "A deployment condition has no sample in the calibration set: its activation ranges are not "
     "calibrated and may clip on the device.",
     "Curate with strategy 'stratified' (condition weights = the deployment mix) and add samples of "
     "the condition to the pool."),
    CatalogueEntry("calibration.condition-under-represented", "warning", "calibration",
     "Deployment condition under-represented",
     "A deployment condition holds less than half of its target share of the calibration set.",
     "Curate with strategy 'stratified', or add samples of the condition to the calibration pool."),
    CatalogueEntry("calibration.too-small", "warning", "calibration", "Calibration set too small",
     "Fewer than 200 calibration samples; MinMax activation ranges are poorly estimated.",
     "Ask for 200-1000 samples."),
    CatalogueEntry("calibration.test-ids", "error", "calibration", "Calibration set holds test samples",
     "Sample ids of the held-out test split are in the calibration set: the accuracy measured on "
     "them is optimistic (the ranges were fitted to them).",
     "Curate from the calibration (or train) split only: pool='calibration'."),
    CatalogueEntry("calibration.test-content", "error", "calibration", "Calibration set holds test images",
     "Calibration samples are, pixel for pixel, images of the held-out test split under other ids (copied "
     "into the calibration folder under new names, or saved at another size): the ranges were fitted to the "
     "test images and the accuracy measured on them is optimistic. Found by pixel hashes, exact and after "
     "the input contract's resize.",
     "Remove the copies from the calibration pool (the evidence lists each pair) and curate again."),
    CatalogueEntry("calibration.duplicates", "warning", "calibration", "Duplicate calibration samples",
     "The same sample id appears more than once: the set is smaller than it says and weights "
     "some samples twice.",
     "Curate the set again (the curator never repeats an id); remove duplicates from a hand-made file."),
    CatalogueEntry("calibration.hash-mismatch", "error", "calibration", "Calibration file hash does not match its ids",
     "The hash stored in the calibration file is not the hash of its sample ids and dataset: the "
     "file was edited after it was curated, and the manifest of a model quantized from it lies.",
     "Curate the set again (`workbench calibrate ... -o FILE`) and re-quantize."),
    CatalogueEntry("calibration.clipping", "warning", "calibration", "Layer clips on a deployment condition",
     "The coverage audit found layers whose activations on a deployment condition fall outside the "
     "calibrated range more often than the clip threshold: that condition saturates on the device.",
     "Add samples of the condition to the calibration set (stratified or coverage strategy)."),
    # -- convert ---------------------------------------------------------------------------------
    CatalogueEntry("convert.added-ops", "warning", "convert", "The conversion added ops the model does not have",
     "The INT8 file holds data-movement ops (TRANSPOSE, PAD, requantizing QUANTIZE, GATHER...) that the source "
     "model does not: the converter put them there (layout changes, padding it could not fuse, scales it had "
     "to match). Info at quantize; a warning where they run on a target's CPU (placement).",
     "Read the structural diff (`workbench quantize` text, the manifest's `structure`): quantize the FP32 "
     ".tflite or .onnx as it is, or export the model so the converter has nothing to add (static shapes, "
     "NHWC, SAME padding); the ops are not yours to replace."),
    CatalogueEntry("convert.depthwise-lost", "warning", "convert", "Depthwise convolutions did not stay depthwise",
     "Depthwise convolutions of the source became other ops in the INT8 file (e.g. grouped CONV_2D), which "
     "the NPUs run slower or not at all.",
     "Check the conversion (onnx2tf's group convolution handling; the structural diff names the counts); "
     "quantize the source as it is where possible."),
    # -- quantize --------------------------------------------------------------------------------
    CatalogueEntry("quantize.float-op-left", "error", "quantize", "Float op left in an INT8 model",
     "An op computes in float inside a model that is meant to be full integer (for ONNX QDQ "
     "models: an op with no integer kernel between DequantizeLinear and QuantizeLinear). It runs "
     "on the CPU in float, or the NPU refuses the graph.",
     "Replace the op with one the target runs in INT8, or move it out of the model "
     "(pre/post-processing); keep it in float only on purpose (--exclude)."),
    CatalogueEntry("quantize.qdq-inside", "warning", "quantize", "QUANTIZE/DEQUANTIZE inside the graph",
     "A QUANTIZE or DEQUANTIZE op sits in the middle of the graph (not at its inputs/outputs): "
     "the model converts between float and integer on the way, a CPU round trip.",
     "Find the float op that forces the conversion (see quantize.float-op-left) and remove it."),
    CatalogueEntry("quantize.per-tensor-collapse", "warning", "quantize", "Per-tensor weights collapse channels",
     "Per-channel weight ranges of a layer differ by orders of magnitude (depthwise convolutions "
     "after batch-norm folding do): one per-tensor scale leaves the small channels a handful of "
     "INT8 levels, or none.",
     "Use per-channel weights (a8w8_pc) where the target allows it, or per-tensor with cross-layer "
     "equalisation (a8w8_pt+cle) on targets where per-channel is slow (imx8mp)."),
    CatalogueEntry("quantize.channel-range-spread", "info", "quantize", "Per-channel ranges spread widely",
     "Per-channel weight scales of a layer differ by orders of magnitude; per-channel weights "
     "handle it, per-tensor weights would collapse the small channels.",
     "Keep per-channel weights, or use a8w8_pt+cle if the target needs per-tensor."),
    CatalogueEntry("quantize.absurd-scale", "error", "quantize", "Activation scale no real activation reaches",
     "An activation tensor of the INT8 model has a quantization range beyond anything a real activation "
     "reaches (e.g. scale 1.33e36: a PAD with float32's lowest value, which onnx2tf writes for a ceil-mode "
     "max-pool, was calibrated in). Every real value of the tensor, and of the tensors sharing its scale, "
     "lands on one INT8 code: the model's output no longer follows its input.",
     "Give the padding a finite value calibration can ignore (export the max-pool without ceil_mode, with "
     "explicit padding), or keep the op named in float (--exclude OP)."),
    CatalogueEntry("quantize.xnnpack-refused", "warning", "quantize", "LiteRT's default runtime refuses the model",
     "LiteRT's default runtime (with the XNNPACK delegate) refuses the INT8 file (`failed to create XNNPACK "
     "runtime`); it loads and runs with the builtin kernels only. An application that opens it the usual way "
     "fails; the workbench evaluates it with the builtin kernels.",
     "Find the tensor XNNPACK rejects (often an absurd scale: see quantize.absurd-scale) and fix the model, or "
     "open it with the builtin op resolver in the application."),
    CatalogueEntry("quantize.range-outliers", "warning", "quantize", "Calibrated ranges far wider than the data",
     "A tensor's calibrated min/max range is many times wider than the range holding 99.8% of its values on "
     "the calibration data (0.1th..99.9th percentile): a few outliers spend the INT8 steps, and the values that "
     "matter get a handful of codes.",
     "Quantize with --calibrator percentile (TFLite and ONNX recipes; --percentile 99.9 to 99.999), or find "
     "why the outliers occur (a padding value, a saturated layer) and fix the model."),
    CatalogueEntry("quantize.range-clipped", "info", "quantize", "Calibrated ranges clip what the data reaches",
     "A float .tflite quantized with AI Edge Quantizer's min/max (a moving average of each sample's min/max): a "
     "tensor's calibrated range holds less than 75% of the range its values span on the calibration data "
     "(0.1th..99.9th percentile), so more than 0.1% of them are clipped. Tensors whose per-sample extremes vary "
     "most are hit hardest: the 1x1 squeeze vectors of squeeze-and-excitation blocks (MediaPipe selfie "
     "segmentation's re_lu_2: [0, 1.35] against a 99.9th percentile of 2.13).",
     "Quantize with --calibrator percentile (99.999 by default; it sets each range to the data's percentiles) "
     "or minmax-global; measure both (docs/byom.md, \"Models outside the zoo\")."),
    CatalogueEntry("quantize.depthwise-spread", "info", "quantize", "One depthwise channel far wider than the rest",
     "A float .tflite's depthwise output (it feeds a convolution, nothing non-linear between) has a channel whose "
     "range on the calibration data is at least 10x its tensor's median channel range (BlazeFace: 70x). One INT8 "
     "scale per activation tensor then leaves the other channels a few steps, and a wider calibrator (minmax-global) "
     "makes it worse.",
     "Quantize with +cle (a8w8_pc+cle): the channel is narrowed on the depthwise and widened on the convolution's "
     "input, the float function unchanged (docs/sweep.md)."),
    # -- accuracy --------------------------------------------------------------------------------
    CatalogueEntry("accuracy.drop", "warning", "accuracy", "Quantized model drops beyond noise",
     "The quantized model's top-1 under a condition is lower than FP32's by more than the threshold (the "
     "gate's max_drop, 1 pp by default) and the drop's 95% CI lies above zero: not sampling noise (a warning "
     "when the whole CI lies past the threshold, info when it reaches below it). The "
     "finding names the suspected cause when the evidence names one (per-tensor weight collapse, per-channel "
     "activation ranges behind one per-tensor activation scale) and what each recipe tried on the spot gave.",
     "Use the recipe the finding measured to fix it (e.g. a8w8_pt+cle); otherwise calibrate with samples of "
     "the condition, or keep the layer it names in float (--exclude)."),
    CatalogueEntry("accuracy.output-collapsed", "error", "accuracy", "INT8 output is noise",
     "An output of the INT8 model barely resembles the FP32 model's on a condition: SQNR under 10 dB or "
     "cosine similarity under 0.9. Whatever the task metric says, what the model outputs there is mostly "
     "quantization error.",
     "Look at the calibrated ranges the finding names (quantize.range-clipped, quantize.range-outliers, "
     "quantize.absurd-scale); quantize with --calibrator percentile, a16w8_pc, or keep the output's last ops in "
     "float (--exclude). A float .tflite source whose calibration data reaches a value in few samples (the faces "
     "among a face detector's crops): calibrate with more of them, under each condition, and quantize with "
     "--recipe a8w8_pc+cle --calibrator percentile (depthwise channels equalised on the data, each range the "
     "data's 0.001..99.999th percentiles): INT8, on the NPU; BlazeFace's scores then reach 10.0-15.6 dB on every "
     "condition, low-light 8.8 -> 12.0 dB against minmax-global, whose extremes of a few bright crops set every "
     "range (docs/byom.md). A condition whose frames hold nothing the model looks for (dark crops with no face) "
     "has less signal in its logits, so the same error reads lower there. a16w8_pc with minmax-global if 8 bits "
     "stay short (it leaves the NPU)."),
    # -- placement -------------------------------------------------------------------------------
    CatalogueEntry("placement.cpu-island", "warning", "placement", "CPU island between NPU segments",
     "Ops run on the CPU between two NPU segments: every inference crosses NPU -> CPU -> NPU "
     "memory, often costing more than the op itself.",
     "Replace the op with one the target's NPU runs (see the reasons in the placement table), or "
     "move it to the start or end of the graph."),
    CatalogueEntry("placement.per-channel-slow", "warning", "placement", "Per-channel weights on a per-tensor NPU",
     "The model has per-channel weights; the i.MX 8M Plus NPU (VeriSilicon) accepts them but runs "
     "them slower than per-tensor.",
     "Quantize with a8w8_pt (per-tensor), with cross-layer equalisation (a8w8_pt+cle) when "
     "per-tensor loses accuracy."),
    CatalogueEntry("placement.int16-activations", "error", "placement", "16-bit activations on an 8-bit NPU",
     "The model has INT16 activations (the 16x8 recipe) but the target's NPU runs 8-bit "
     "activations only: those ops fall back to the CPU.",
     "Use an a8w8 recipe for this target."),
    CatalogueEntry("placement.compiler-crash", "error", "placement", "The BSP's compiler crashed on the model",
     "The NPU compiler of the target's BSP (Vela on imx93) exited with an error, e.g. an AssertionError inside "
     "its graph rewrite: the board gets no compiled model and every op runs on the CPU. The other targets are "
     "placed as usual; the report shows the other installed compiler's placement beside it.",
     "Take a BSP release whose compiler compiles the model (--bsp), or change the model where the compiler "
     "fails (its traceback, in the finding's evidence) and place it again."),
    CatalogueEntry("placement.bsp-compiler-cpu", "warning", "placement", "The BSP's compiler leaves ops on the CPU",
     "The compiler version the board's BSP ships puts ops on the CPU that the newest compiler "
     "places on the NPU: the board runs slower than a desktop compile suggests.",
     "Compile with the BSP's compiler version (as the board does), or update the BSP."),
    # -- timing ----------------------------------------------------------------------------------
    CatalogueEntry("timing.cold-start-in-steady-state", "warning", "timing", "Cold start inside the steady state",
     "The first timed runs are far slower than the median (first-invoke compile or cache warm-up): the "
     "mean and p99 include start-up cost. On the host CPU (a shared machine, not the device) it is info.",
     "Raise the warm-up count so the timed runs start after the slow ones."),
    CatalogueEntry("timing.still-falling", "warning", "timing", "Warm-up still falling",
     "Latency is still trending down across the timed runs: the steady state was not reached. On the "
     "host CPU (a shared machine, not the device) it is info.",
     "Raise the warm-up count."),
    CatalogueEntry("timing.too-few-runs", "warning", "timing", "Too few runs for the p99",
     "The p99 is reported from fewer than 100 runs: it is an extreme sample, not a percentile.",
     "Time at least 100 runs (--runs 200 or more for a tight p99 interval)."),
    CatalogueEntry("timing.host-cpu", "info", "timing", "Latency measured on the host CPU",
     "No board was used: the latency is the host CPU's, not the NPU's.",
     "Time on a board (--board NAME) for device latency."),
    # -- deploy ----------------------------------------------------------------------------------
    CatalogueEntry("deploy.manifest-sha-mismatch", "error", "deploy", "Manifest does not describe the deployed file",
     "The sha256 in model_manifest.json differs from the model file beside it: the file was "
     "replaced or edited after quantization, and everything the manifest says is unproven.",
     "Re-quantize (or copy the model together with its manifest)."),
    CatalogueEntry("deploy.toolchain-drift", "warning", "deploy", "Toolchain differs from the manifest",
     "The tool versions recorded in the model manifest differ from the ones installed now: "
     "re-quantizing would not reproduce the deployed model bit for bit.",
     "Pin the versions in the manifest, or re-quantize and re-validate with the current tools."),
    # -- board -----------------------------------------------------------------------------------
    CatalogueEntry("board.placement-mismatch", "error", "board", "Board places ops differently from the host",
     "On the board, ops run on the CPU that placement analysis put on the NPU (or the NPU share "
     "differs): the host's placement report does not describe the device.",
     "Compare the board's delegate log with the placement table; check the BSP and delegate version."),
    CatalogueEntry("board.int8-disagreement", "error", "board", "Board and host INT8 outputs disagree",
     "The INT8 model gives different predictions on the board than on the host: the host accuracy "
     "does not hold on the device (delegate kernels, rounding, or a different file).",
     "Check the deployed file's hash; report the op where outputs diverge to the BSP vendor."),
    CatalogueEntry("board.tensor-divergence", "error", "board", "The board's INT8 tensors depart from the host's",
     "`workbench bisect` ran the same INT8 file on the same input codes on the host and on the board and found "
     "the first tensor, in execution order, whose codes differ beyond the tolerance while the op's inputs "
     "agree: that op computes differently there (kernel rounding, a delegate's implementation, a different "
     "runtime). A warning when the model's outputs still agree (a later op masks it).",
     "Read the op named; compare it with the placement (NPU or CPU there); try the board's runtime with "
     "the other kernels or delegate version; report the op, its inputs' agreement and the numbers to the "
     "BSP vendor."),
)
