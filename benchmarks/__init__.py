"""Benchmarks that print figures (ratios measured in one run); they are not tests."""
