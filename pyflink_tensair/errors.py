"""The exceptions pyflink_tensair raises: one base class, one subclass per kind of failure."""


class TensairError(Exception):
    """Base class of every error raised by pyflink_tensair."""


class ConfigError(TensairError, ValueError):
    """A configuration value breaks a rule; the message names the field, the rule and the value."""


class WireFormatError(TensairError, ValueError):
    """Bytes that are not a valid pyflink_tensair record (batch, gradient message, tensors)."""


class ModelError(TensairError):
    """The user's model cannot be built, loaded or trained the way the replicas need."""


class JavaToolchainError(TensairError, RuntimeError):
    """The Java feedback channel cannot be compiled (no JDK, or no pyflink jars)."""
