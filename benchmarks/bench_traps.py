"""How many planted silent failures the workbench catches, and how many clean models it accuses.

Runs every trap of the zoo (``tests/traps/zoo.py``: one constructed model, dataset, calibration
file or runner result per silent failure) and counts a trap as flagged when its finding code is
reported with severity warning or above.  Then runs the clean models: the built-in reference model
with each target's default recipe and the default calibration set (stratified, 200), timed on the
host CPU, and a clean small ONNX model; any finding of severity warning or above on them is a false
alarm.  Last line: ``flagged=<k>/<n> false_alarms=<m>`` (goal: n/n and 0).

    .venv/bin/python benchmarks/bench_traps.py [--only NAME,...] [--no-reference]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated trap names (default: all)")
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the reference model's clean runs (the ONNX clean model still runs)")
    args = parser.parse_args(argv)
    from tests.traps.zoo import TRAPS, clean_onnx, clean_reference, clean_reference_timing
    from workbench.vocab import TARGETS
    names = [n for n in args.only.split(",") if n] or list(TRAPS)
    flagged, false_alarms = 0, 0
    with tempfile.TemporaryDirectory(prefix="wb-traps-") as tmp:
        root = Path(tmp)
        for name in names:
            code, build = TRAPS[name]
            start = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    found = build(root).with_code(code).at_least("warning")
            except Exception as exc:  # noqa: BLE001 - a trap that breaks the workbench is a miss, reported
                print(f"MISS  {name:<28} {code:<38} error {type(exc).__name__}: {exc}"[:300])
                continue
            ok = bool(found)
            flagged += ok
            detail = found.items[0].message if ok else "not reported"
            print(f"{'OK' if ok else 'MISS':<5} {name:<28} {code:<38} {time.perf_counter() - start:5.1f}s  "
                  f"{detail}"[:240])
        clean = [("clean onnx (a8w8_pc)", lambda: clean_onnx(root))]
        if not args.no_reference:
            clean += [(f"reference {t}", lambda t=t: clean_reference(t) + clean_reference_timing(t))
                      for t in TARGETS]
        for label, build in clean:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = build()
            alarms = found.at_least("warning")
            false_alarms += bool(alarms)
            info = ", ".join(found.codes) or "none"
            print(f"{'ALARM' if alarms else 'clean':<5} {label:<28} {time.perf_counter() - start:5.1f}s  "
                  f"findings: {info}" + (f"  <- {alarms.items[0].summary()}" if alarms else ""))
    print(f"flagged={flagged}/{len(names)} false_alarms={false_alarms}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
