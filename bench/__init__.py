"""Benchmarks: each figure is printed beside the limit measured in the same run."""
