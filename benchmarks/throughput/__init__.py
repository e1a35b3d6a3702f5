"""Sustainable-throughput benchmark: our replicas against the Flink ML pattern, one model, the plain loop.

``python -m benchmarks run`` probes arrival rates per system, workload and replica count and writes
one JSON record per run; ``python -m benchmarks report`` turns them into ``docs/benchmarks.md``.
"""
