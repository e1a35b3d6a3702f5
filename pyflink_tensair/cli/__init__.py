"""What the jobs in ``jobs/`` share: flags, progress while a job runs, the run and its summary.

Not Flink glue: a job builds its graph with :func:`pyflink_tensair.train`, then
:func:`~.run.run_job` runs it. :mod:`.flags` makes the shared flags from ``TrainConfig``'s fields
(:mod:`.settings`) and checks them by the config's own rules, :mod:`.progress` follows the result files and prints progress lines,
:mod:`.tensorboard` writes TensorBoard logs; the summary's figures are computed by the pure
:mod:`pyflink_tensair.core.summary`.

Example::

    >>> import argparse
    >>> from pyflink_tensair.cli import add_job_arguments
    >>> parser = argparse.ArgumentParser()
    >>> add_job_arguments(parser, batches=10, batch_size=8)
    >>> parser.parse_args([]).replicas
    2
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# Loaded on first use: importing a package must not import its submodules (see pyflink_tensair._lazy).
_NAMES = {
    "add_config_arguments": ".flags", "add_job_arguments": ".flags", "at_least": ".flags", "config_from_args": ".flags",
    "default_outdir": ".flags", "held_batches_capacity": ".flags",
    "progress_line": ".progress",
    "main_guard": ".run", "run_job": ".run",
}
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from .flags import (add_config_arguments, add_job_arguments, at_least, config_from_args, default_outdir,
                        held_batches_capacity)
    from .progress import progress_line
    from .run import main_guard, run_job

__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
