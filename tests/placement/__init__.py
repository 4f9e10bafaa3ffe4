"""Tests of op placement."""
