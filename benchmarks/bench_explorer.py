"""The explorer at interactive speed: first view, a new setting, a setting seen before.

Run: .venv/bin/python benchmarks/bench_explorer.py [--size 200] [--repeat 3]

Builds ``wb.explorer`` on the reference model and the built-in dataset (as notebook 00 does) and times:

- ``widgets_s``: from the call to widgets that can be shown (in a kernel the explorer is displayed at
  this point and its status line reports each step of the first view; goal <= 1 s);
- ``first_view_s``: the first compute and draw;
- ``new_setting_s``: a knob moved to a setting not seen before (a8w8_pt: quantize, evaluate, place, draw);
- ``seen_setting_s``: back to a setting seen before (median of ``--repeat`` round trips; goal <= 0.5 s).

Last line: ``widgets_s=... first_view_s=... new_setting_s=... seen_setting_s=... seen_over_goal=<s/0.5>``.

``--live`` times what a person sees instead: a real Jupyter kernel (the ``npu-workbench`` kernelspec, as
JupyterLab starts it) runs notebook 00's cells; from the moment the explorer's cell is sent, it times
the first output the kernel sends (the "loading" line: goal <= 1 s), the widgets, and the idle state
(first view drawn).  Last line: ``first_output_s=... widgets_shown_s=... first_view_done_s=...``.
Timings depend on the load of the machine: state ``uptime``'s load with them.
"""

from __future__ import annotations

import argparse
import statistics
import time


def live() -> None:
    """Notebook 00 in a real kernel: when does the person see the first output, the widgets, the first view?"""
    import json
    from pathlib import Path

    from jupyter_client.manager import start_new_kernel
    cells = [("".join(c["source"])) for c in json.loads(Path(__file__).parents[1].joinpath(
        "notebooks", "00_explore.ipynb").read_text())["cells"] if c["cell_type"] == "code"]
    km, kc = start_new_kernel(kernel_name="npu-workbench")
    try:
        for code in cells[:2]:                                  # parameters, `import workbench as wb`
            kc.execute_interactive(code, timeout=600, output_hook=lambda msg: None)
        start = time.perf_counter()
        msg_id = kc.execute(cells[2])                           # wb.explorer(...): what the person waits for
        first = widgets = None
        while True:
            msg = kc.get_iopub_msg(timeout=900)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, now = msg["msg_type"], time.perf_counter() - start
            if kind in ("stream", "display_data", "update_display_data", "execute_result") and first is None:
                first = now
            if kind in ("display_data", "execute_result") and widgets is None and \
                    "application/vnd.jupyter.widget-view+json" in msg["content"].get("data", {}):
                widgets = now
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                done = now
                break
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    print(f"first_output_s={first if first is None else round(first, 2)} "
          f"widgets_shown_s={widgets if widgets is None else round(widgets, 2)} first_view_done_s={done:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200, help="calibration samples (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="round trips between two seen settings")
    parser.add_argument("--live", action="store_true", help="time notebook 00 in a real Jupyter kernel")
    args = parser.parse_args()
    if args.live:
        live()
        return
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
