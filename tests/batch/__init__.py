"""Tests of the papermill batch, reports and the quality gate."""
