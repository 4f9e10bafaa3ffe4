"""Tests of the target tables."""
