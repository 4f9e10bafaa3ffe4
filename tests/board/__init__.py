"""Tests of the board stage (a package, so test module names stay unique)."""
