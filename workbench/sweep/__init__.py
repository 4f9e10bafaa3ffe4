"""Sweeps: targets x recipes x calibration strategy and size x exclusion sets, one cell each.

- :mod:`.plan`: the cells of a sweep (``SweepSpec`` in, ``SweepCell`` tuples out) and the
  fallback-aware exclusion sets (worst layers, ops a target runs on the CPU anyway);
- :mod:`.cell`: one cell through the stage chain (calibrate -> quantize -> accuracy per
  condition -> placement -> latency), cached under a content key;
- :mod:`.run`: the ``sweep`` verb; cells run as Dask tasks (a ``LocalCluster`` or a
  scheduler address) or in a plain serial loop;
- :mod:`.result`: ``SweepResult`` with the table, Pareto plots and the recommendation per
  target under a gate;
- :mod:`.commands`: ``workbench sweep``.
"""
