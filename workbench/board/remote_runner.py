"""Time a .tflite model invocation by invocation (the script the workbench pushes to a board).

Runs on the board with nothing but numpy and ``tflite_runtime`` or ``ai_edge_litert``
(or full TensorFlow).  Standard library + numpy only, Python 3.6+ syntax; no import
of the workbench.  Prints one JSON object on stdout::

    {"ok": true, "runtime": "...", "delegate_load_us": ..., "interpreter_init_us": ...,
     "cold_start_us": ..., "first_inference_us": ..., "warmup_us": [...], "runs_us": [...]}

Phases are kept apart: delegate loading and interpreter build + ``allocate_tensors``
(cold start), the first ``invoke()`` (an NPU graph compile lands here), ``warmup``
further invocations, then ``runs`` timed invocations.  On failure it prints
``{"ok": false, "stage": ..., "error": ...}`` and exits with status 3.

With ``--inputs FILE.npz`` (one float32 array ``(N, ...)`` per deployment condition,
already prepared as the model's float input) it also runs every sample once and adds
``"outputs": {condition: [[float, ...], ...]}``: each output vector dequantized with
the model's own output parameters, inputs quantized with its input parameters as
TFLite's QUANTIZE does (``round half away from zero``, then the zero point, clipped).
With ``--tensors FILE.npz`` (one array ``input_<k>`` of shape ``(N, ...)`` per model
input, already in the input's own dtype: INT8 codes for an INT8 model) it runs every
sample once and adds ``"tensors"``: an ``.npz`` (base64) holding, for every output of
the model, the raw values it produced (``t<tensor index>``, shape ``(N, ...)``, never
dequantized: the exact integer codes).  The bisection exposes intermediate tensors as
outputs and uses this mode.  ``--kernels`` picks the CPU kernels of the runtime:
``default`` (what the runtime does out of the box: the optimized kernels, with XNNPACK
on most builds), ``optimized`` (the optimized kernels without default delegates) or
``reference`` (TFLite's reference kernels); a host-side "board" with other kernels
shows how much the same file can differ between two CPUs' runtimes.
Every parameter is a plain command-line value or a plain numpy file: nothing here
evaluates text.
"""

import argparse
import base64
import io
import json
import sys
import time

KERNELS = {"default": None, "optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "reference": "BUILTIN_REF"}


def _fail(stage, message):
    sys.stdout.write(json.dumps({"ok": False, "stage": stage, "error": message}) + "\n")
    sys.stdout.flush()
    sys.exit(3)


def _import_runtime():
    errors = []
    for name in ("tflite_runtime.interpreter", "ai_edge_litert.interpreter", "tensorflow.lite"):
        try:
            module = __import__(name, fromlist=["Interpreter"])
        except ImportError as exc:
            errors.append("%s: %s" % (name, exc))
            continue
        top = __import__(name.split(".")[0])
        version = getattr(top, "__version__", "unknown")
        if name == "tensorflow.lite":
            return (module.Interpreter, module.experimental.load_delegate, "tensorflow %s" % version,
                    getattr(module.experimental, "OpResolverType", None))
        return (module.Interpreter, module.load_delegate, "%s %s" % (name.split(".")[0], version),
                getattr(module, "OpResolverType", None))
    _fail("import", "no TFLite runtime found (tried tflite_runtime, ai_edge_litert, tensorflow): "
          + "; ".join(errors))


def _fill_inputs(interpreter, np, seed):
    rng = np.random.RandomState(seed)
    for detail in interpreter.get_input_details():
        shape = [int(d) for d in detail["shape"]]
        dtype = np.dtype(detail["dtype"])
        if dtype.kind == "f":
            data = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            low, high = max(int(info.min), -128), min(int(info.max), 127)
            data = rng.randint(low, high + 1, size=shape).astype(dtype)
        elif dtype.kind == "b":
            data = rng.randint(0, 2, size=shape).astype(dtype)
        else:
            _fail("inputs", "input %r has dtype %s, which the runner cannot fill"
                  % (detail["name"], dtype))
        interpreter.set_tensor(detail["index"], data)


def _quantize(np, x, detail):
    dtype = np.dtype(detail["dtype"])
    if dtype.kind not in "iu":
        return x.astype(dtype)
    scale, zero_point = detail["quantization"]
    info = np.iinfo(dtype)
    v = np.asarray(x, np.float32) / np.float32(scale)
    v = np.trunc(v + np.copysign(np.float32(0.5), v))
    v += np.float32(zero_point)
    np.clip(v, info.min, info.max, out=v)
    return v.astype(dtype)


def _dequantize(np, y, detail):
    if np.dtype(detail["dtype"]).kind not in "iu":
        return y.astype(np.float32)
    scale, zero_point = detail["quantization"]
    return (y.astype(np.float32) - np.float32(zero_point)) * np.float32(scale)


def apply_contract(np, pixels, params):
    """The workbench's InputContract.apply for pixels already at the model's size (the host
    resizes): uint8 (/255) or float in [0, 1], NHWC; ``params`` is ``InputContract.to_params()``
    (color, scale, offset, layout).  Same arithmetic, numpy only."""
    x = np.asarray(pixels)
    x = x.astype(np.float32) / np.float32(255.0) if x.dtype == np.uint8 else x.astype(np.float32)
    if x.ndim == 3:
        x = x[..., None]
    if x.shape[3] == 4:
        x = x[..., :3]
    if params.get("color") == "grayscale":
        if x.shape[3] == 3:
            x = (x @ np.array([0.299, 0.587, 0.114], np.float32))[..., None].astype(np.float32)
    else:
        if x.shape[3] == 1:
            x = np.repeat(x, 3, axis=3)
        if params.get("color") == "bgr":
            x = x[..., ::-1]
    scale = np.asarray(params.get("scale", [1.0]), np.float32)
    offset = np.asarray(params.get("offset", [0.0]), np.float32)
    if not (np.all(scale == 1.0) and np.all(offset == 0.0)):
        x = x * scale + offset
    x = x.astype(np.float32)
    if params.get("layout") == "NCHW":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    return x


def _run_inputs(interpreter, np, path, contract=None):
    try:
        data = np.load(path, allow_pickle=False)
        if contract is not None:       # pixels + the model's input contract (plain JSON parameters)
            arrays = dict((key, apply_contract(np, data[key], contract)) for key in data.files)
        else:
            arrays = dict((key, np.asarray(data[key], np.float32)) for key in data.files)
    except Exception as exc:
        _fail("inputs", "cannot read inputs %s: %s" % (path, exc))
    detail = interpreter.get_input_details()[0]
    out_detail = interpreter.get_output_details()[0]
    outputs = {}
    for key in sorted(arrays):
        rows = []
        for sample in arrays[key]:
            interpreter.set_tensor(detail["index"], _quantize(np, sample[None, ...], detail))
            interpreter.invoke()
            y = _dequantize(np, interpreter.get_tensor(out_detail["index"]), out_detail)
            rows.append([float(v) for v in y.reshape(-1)])
        outputs[key] = rows
    return outputs


def _run_tensors(interpreter, np, path):
    """Every sample of ``path`` through the model; the raw values of every output."""
    try:
        data = np.load(path, allow_pickle=False)
        arrays = dict((key, data[key]) for key in data.files)
    except Exception as exc:
        _fail("inputs", "cannot read tensors input %s: %s" % (path, exc))
    details = interpreter.get_input_details()
    feeds = []
    for k, detail in enumerate(details):
        key = "input_%d" % k
        if key not in arrays:
            _fail("inputs", "%s holds no %r for model input %r" % (path, key, detail["name"]))
        x = arrays[key]
        if np.dtype(x.dtype) != np.dtype(detail["dtype"]):
            _fail("inputs", "%s: %r has dtype %s, model input %r wants %s"
                  % (path, key, x.dtype, detail["name"], np.dtype(detail["dtype"])))
        feeds.append((detail["index"], x))
    n = min(len(x) for _, x in feeds) if feeds else 0
    out_details = interpreter.get_output_details()
    rows = dict((d["index"], []) for d in out_details)
    for i in range(n):
        for index, x in feeds:
            interpreter.set_tensor(index, x[i:i + 1])
        interpreter.invoke()
        for d in out_details:
            rows[d["index"]].append(np.array(interpreter.get_tensor(d["index"])))
    buffer = io.BytesIO()
    np.savez(buffer, **dict(("t%d" % index, np.concatenate(values) if values else np.zeros((0,)))
                            for index, values in rows.items()))
    return {"samples": n, "npz": base64.b64encode(buffer.getvalue()).decode("ascii"),
            "outputs": [{"index": int(d["index"]), "name": d["name"], "dtype": np.dtype(d["dtype"]).name,
                         "shape": [int(v) for v in d["shape"]]} for d in out_details]}


def _parse_options(items):
    options = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            _fail("arguments", "delegate option %r must be key=value" % item)
        options[key] = value
    return options


def main(argv=None):
    parser = argparse.ArgumentParser(description="time a .tflite model invocation by invocation")
    parser.add_argument("--model", required=True)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--delegate", default=None, help="external delegate library path")
    parser.add_argument("--delegate-option", action="append", default=[], help="key=value")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--inputs", default=None,
                        help=".npz of prepared float inputs, one array per condition")
    parser.add_argument("--contract", default=None,
                        help="JSON of the model's input contract (InputContract.to_params()): the --inputs "
                             "arrays are then pixels (uint8 or float in [0, 1], NHWC, at the model's size) "
                             "that the runner prepares as the workbench does")
    parser.add_argument("--tensors", default=None,
                        help=".npz of raw model inputs (input_<k>: (N, ...) in the input's dtype): returns "
                             "the raw values of every model output per sample")
    parser.add_argument("--kernels", choices=sorted(KERNELS), default="default",
                        help="CPU kernels: default (the runtime's own choice), optimized (no default "
                             "delegates) or reference (TFLite's reference kernels)")
    args = parser.parse_args(argv)
    contract = None
    if args.contract:
        try:
            contract = json.loads(args.contract)
        except ValueError as exc:
            _fail("arguments", "--contract is not JSON: %s" % exc)

    try:
        import numpy as np
    except ImportError as exc:
        _fail("import", "numpy is not installed: %s" % exc)
    Interpreter, load_delegate, runtime, resolver_type = _import_runtime()
    resolver = None
    if KERNELS[args.kernels] is not None:
        if resolver_type is None:
            _fail("arguments", "--kernels %s: %s has no OpResolverType (too old to choose kernels)"
                  % (args.kernels, runtime))
        resolver = getattr(resolver_type, KERNELS[args.kernels])

    clock = time.perf_counter
    delegates = []
    t0 = clock()
    if args.delegate:
        try:
            delegates.append(load_delegate(args.delegate, _parse_options(args.delegate_option)))
        except Exception as exc:  # the runtime raises ValueError/RuntimeError/OSError
            _fail("delegate", "could not load delegate %s: %s" % (args.delegate, exc))
    t1 = clock()
    try:
        kwargs = {"model_path": args.model}
        if delegates:
            kwargs["experimental_delegates"] = delegates
        if args.threads:
            kwargs["num_threads"] = args.threads
        if resolver is not None:
            kwargs["experimental_op_resolver_type"] = resolver
        interpreter = Interpreter(**kwargs)
        interpreter.allocate_tensors()
    except Exception as exc:
        _fail("load", "could not load model %s: %s" % (args.model, exc))
    t2 = clock()
    n_ops = None
    try:
        n_ops = len(interpreter._get_ops_details())  # noqa: SLF001 (optional detail)
    except Exception:
        pass
    _fill_inputs(interpreter, np, args.seed)

    def timed():
        start = clock()
        interpreter.invoke()
        return (clock() - start) * 1e6

    try:
        first = timed()
        warm = [timed() for _ in range(max(0, args.warmup))]
        runs = [timed() for _ in range(max(0, args.runs))]
    except Exception as exc:
        _fail("invoke", "invoke() failed: %s" % exc)
    tensors = None
    if args.tensors:
        try:
            tensors = _run_tensors(interpreter, np, args.tensors)
        except SystemExit:
            raise
        except Exception as exc:
            _fail("invoke", "invoke() on the tensors input failed: %s" % exc)
        try:   # the ops as the runtime runs them (a delegate's partitions show as DELEGATE)
            tensors["ops_run"] = [op["op_name"] for op in interpreter._get_ops_details()]  # noqa: SLF001
        except Exception:
            tensors["ops_run"] = None
    outputs = None
    if args.inputs:
        try:
            outputs = _run_inputs(interpreter, np, args.inputs, contract)
        except SystemExit:
            raise
        except Exception as exc:
            _fail("invoke", "invoke() on the inputs failed: %s" % exc)
    payload = {
        "ok": True, "runtime": runtime, "python": sys.version.split()[0],
        "delegate": args.delegate, "n_ops": n_ops, "kernels": args.kernels,
        "delegate_load_us": (t1 - t0) * 1e6, "interpreter_init_us": (t2 - t1) * 1e6,
        "cold_start_us": (t2 - t0) * 1e6, "first_inference_us": first,
        "warmup_us": warm, "runs_us": runs}
    if outputs is not None:
        payload["outputs"] = outputs
    if tensors is not None:
        payload["tensors"] = tensors
    sys.stdout.write(json.dumps(payload) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
