"""Targets: one declarative table per i.MX NPU."""
