"""The exceptions pyflink_tensair raises: one base class, one subclass per kind of failure.

Every message names what broke the rule, the rule, and what was received, the way Keras reports
bad arguments (``"... must be ... Received: name=value"``). A job's ``main`` catches
:class:`TensairError` and prints it as one line (exit code 2): nothing needs re-wrapping.

Every exception of the package is here but one: ``jvm/build.py``'s ``ChannelBuildError``,
since ``setup.py`` loads that file alone in a build environment; the package re-raises it as
:class:`JavaToolchainError`.

Each subclass also derives from the built-in exception a Python user would catch for it::

    >>> issubclass(DataNotFoundError, FileNotFoundError), issubclass(ConfigError, ValueError)
    (True, True)
"""


class TensairError(Exception):
    """Base class of every error raised by pyflink_tensair."""


class ConfigError(TensairError, ValueError):
    """A value given to pyflink_tensair (a configuration field, a flag, a function's argument)
    breaks a rule; the message names the field, the rule and the value."""


class WireFormatError(TensairError, ValueError):
    """Bytes that are not a valid pyflink_tensair record (batch, gradient message, tensors)."""


class ModelError(TensairError):
    """The user's model cannot be built, loaded or trained the way the replicas need."""


class ProtocolError(TensairError, RuntimeError):
    """Replicas broke the training protocol: a batch after the end of input, a message from an
    unknown sender, replicas that never finished."""


class DataError(TensairError, ValueError):
    """A data set or corpus cannot be used: malformed files, too small for one batch, changed
    since the job was built, or not to be had (a failed download)."""


class BadInputError(DataError):
    """A record, batch or corpus line that cannot be trained on, with ``Guards(bad_input="fail")``
    (by default such input is set aside into the dead-letter stream instead)."""


class BatchRejectedError(BadInputError):
    """The model itself refused a batch its checks let through (e.g. an index outside an
    embedding table); its step was not applied."""


class DataNotFoundError(DataError, FileNotFoundError):
    """A data set's file or folder does not exist or holds none of the files expected."""


class ClusterError(TensairError, RuntimeError):
    """The standalone cluster a command needs is not there (not started, or stopped)."""


class JavaToolchainError(TensairError, RuntimeError):
    """The Java feedback channel cannot be compiled (no JDK, or no pyflink jars)."""


class KafkaError(TensairError, RuntimeError):
    """Kafka is not where it should be: the broker, its jars or the Flink connector jar."""


class TrainerFailed(TensairError):
    """A replica's trainer thread raised; the original error is the ``__cause__``."""


class WaitTimeout(TensairError, TimeoutError):
    """What :func:`~pyflink_tensair.waiting.wait_until` raises when the time is up: a
    :class:`TimeoutError` that a caller can tell from one the condition itself let through (a
    socket's, say)."""


class SavepointError(ClusterError):
    """A savepoint the cluster did not take: it failed, or did not complete in time."""


class SavepointDeclined(SavepointError):
    """A savepoint a task declined for a moment (it was finishing, or not running yet): the same
    savepoint a moment later may succeed."""
