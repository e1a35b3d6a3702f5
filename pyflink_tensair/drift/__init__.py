"""Drift detectors: pure objects that watch one value per step and say when it rose for good.

- :class:`OPTWIN` (the detector TensAIR pairs its replicas with) and :class:`PageHinkley`, behind
  one interface (:class:`DriftDetector`: ``update(value) -> bool``, ``last_drift``, ``snapshot()``);
- :func:`make` builds one by name, :func:`restore` rebuilds one from its snapshot;
- :class:`AutoPolicy`: when a replica in ``auto`` mode trains and when it serves (converged,
  drift, resume), its detector inside its state.

No pyflink, TensorFlow or Keras here: the replicas hold a detector in their state, the benchmark
``python -m benchmarks.drift_detectors`` measures them on generated streams
(:mod:`pyflink_tensair.testing.drift_streams`).

Example::

    >>> from pyflink_tensair import drift
    >>> detector = drift.make("optwin", rigor=0.5)
    >>> any(detector.update(0.0) for _ in range(100)), any(detector.update(1.0) for _ in range(100))
    (False, True)
"""

from .detector import Drift, DriftDetector, make, restore
from .optwin import OPTWIN
from .page_hinkley import PageHinkley
from .policy import AutoPolicy

__all__ = ["AutoPolicy", "Drift", "DriftDetector", "OPTWIN", "PageHinkley", "make", "restore"]
