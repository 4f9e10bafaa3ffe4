"""Tests of the stage notebooks (form, parameters)."""
