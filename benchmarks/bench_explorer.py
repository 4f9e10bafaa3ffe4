"""The explorer at interactive speed: first view, a new setting, a setting seen before.

Run: .venv/bin/python benchmarks/bench_explorer.py [--size 200] [--repeat 3]

Builds ``wb.explorer`` on the reference model and the built-in dataset (as notebook 00 does) and times:

- ``widgets_s``: from the call to widgets that can be shown (in a kernel the explorer is displayed at
  this point and its status line reports each step of the first view; goal <= 1 s);
- ``first_view_s``: the first compute and draw;
- ``new_setting_s``: a knob moved to a setting not seen before (a8w8_pt: quantize, evaluate, place, draw);
- ``seen_setting_s``: back to a setting seen before (median of ``--repeat`` round trips; goal <= 0.5 s).

Last line: ``widgets_s=... first_view_s=... new_setting_s=... seen_setting_s=... seen_over_goal=<s/0.5>``.
Timings depend on the load of the machine: state ``uptime``'s load with them.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200, help="calibration samples (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="round trips between two seen settings")
    args = parser.parse_args()
    import matplotlib
    matplotlib.use("Agg")

    import workbench as wb
    from workbench.models.reference import reference_model
    reference_model()                                    # trained or loaded once, outside the timings
    start = time.perf_counter()
    ex = wb.explorer(target="imx8mp", recipe="a8w8_pc", calibration_size=args.size, compute=False)
    widgets_s = time.perf_counter() - start
    start = time.perf_counter()
    ex.update()
    first_view_s = time.perf_counter() - start
    start = time.perf_counter()
    ex.recipe.value = "a8w8_pt"                           # auto_update: computes and draws
    new_setting_s = time.perf_counter() - start
    assert ex.error is None and ex.result.settings.recipe == "a8w8_pt", ex.error
    seen = []
    for _ in range(args.repeat):
        for recipe in ("a8w8_pc", "a8w8_pt"):
            start = time.perf_counter()
            ex.recipe.value = recipe
            seen.append(time.perf_counter() - start)
            assert ex.result.settings.recipe == recipe
    seen_s = statistics.median(seen)
    print(f"updates: {ex.updates}; seen-setting redraws: {', '.join(f'{s:.3f}' for s in seen)} s")
    print(f"widgets_s={widgets_s:.2f} first_view_s={first_view_s:.1f} new_setting_s={new_setting_s:.2f} "
          f"seen_setting_s={seen_s:.3f} seen_over_goal={seen_s / 0.5:.2f}")


if __name__ == "__main__":
    main()
