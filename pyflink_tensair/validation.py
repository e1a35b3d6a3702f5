"""The argument checks every module shares, each raising :class:`~pyflink_tensair.errors.ConfigError`
in the one form (``"<name> must be <rule>. Received: <name>=<value>"``).

A bool is not an int here (``True`` is an ``int`` to Python, never a count to a user)::

    >>> require_int("replicas", 2, minimum=1)
    2
    >>> require_int("replicas", True, minimum=1)
    Traceback (most recent call last):
    ...
    pyflink_tensair.errors.ConfigError: replicas must be an int >= 1. Received: replicas=True
    >>> require_number("rate", 2.5, minimum=0), require_int("bound", None, minimum=0, optional=True)
    (2.5, None)
    >>> require_callable("parse", "json", "a function of one record")
    Traceback (most recent call last):
    ...
    pyflink_tensair.errors.ConfigError: parse must be a function of one record. Received: parse='json'
    >>> require_rate("rate", float("nan"))
    Traceback (most recent call last):
    ...
    pyflink_tensair.errors.ConfigError: rate must be >= 0 batches per second (0: unpaced), a finite number. Received: rate=nan
"""

from __future__ import annotations

import numbers
from typing import Any, Iterable, Optional

from .errors import ConfigError


def is_int(value: Any) -> bool:
    """An integer that is not a bool (NumPy integers count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _fail(name: str, rule: str, value: Any, optional: bool):
    raise ConfigError(f"{name} must be {rule}{' or None' if optional else ''}. Received: {name}={value!r}")


def require_int(name: str, value: Any, minimum: Optional[int] = None, *, optional: bool = False):
    """``value`` if it is an int (``>= minimum``), or ``None`` when ``optional``."""
    if value is None and optional:
        return None
    if not is_int(value) or (minimum is not None and value < minimum):
        _fail(name, "an int" + (f" >= {minimum}" if minimum is not None else ""), value, optional)
    return value


def require_number(name: str, value: Any, minimum: Optional[float] = None, *, above: Optional[float] = None,
                   maximum: Optional[float] = None, optional: bool = False, unit: str = ""):
    """``value`` if it is a finite number with ``minimum <= value``, ``above < value`` and
    ``value <= maximum`` (each bound optional), or ``None`` when ``optional``; ``unit`` is named
    in the rule (``"a number of seconds > 0"``)."""
    if value is None and optional:
        return None
    ok = is_number(value) and value == value and abs(value) != float("inf")
    rules = []
    if above is not None:
        rules.append(f"> {above:g}")
        ok = ok and value > above
    if minimum is not None:
        rules.append(f">= {minimum:g}")
        ok = ok and value >= minimum
    if maximum is not None:
        rules.append(f"<= {maximum:g}")
        ok = ok and value <= maximum
    if not ok:
        kind = f"a number of {unit}" if unit else ("a finite number" if not rules else "a number")
        _fail(name, " ".join([kind, " and ".join(rules)]).strip(), value, optional)
    return value


def require_choice(name: str, value: Any, choices: Iterable[str]):
    """``value`` if it is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(repr(c) for c in choices)}. Received: {name}={value!r}")
    return value


def require_field_choices(instance, owner: str = "") -> None:
    """Each field of the dataclass ``instance`` whose metadata lists its ``"choices"`` holds one of
    them: the one list of a field's allowed values, in its declaration (``owner``: the prefix of
    the field's name in the message).

        >>> import dataclasses
        >>> @dataclasses.dataclass
        ... class Job:
        ...     backend: str = dataclasses.field(default="a", metadata={"choices": ("a", "b")})
        >>> require_field_choices(Job("c"), "Job")
        Traceback (most recent call last):
        ...
        pyflink_tensair.errors.ConfigError: Job.backend must be 'a' or 'b'. Received: backend='c'
    """
    import dataclasses

    for f in dataclasses.fields(instance):
        choices = f.metadata.get("choices")
        value = getattr(instance, f.name)
        if choices is not None and value not in choices:
            quoted = [repr(c) for c in choices]
            allowed = " or ".join(quoted) if len(quoted) == 2 else "one of " + ", ".join(quoted)
            raise ConfigError(f"{owner + '.' if owner else ''}{f.name} must be {allowed}. Received: {f.name}={value!r}")


def require_bool(name: str, value: Any) -> bool:
    """``value`` if it is ``True`` or ``False`` (not a truthy 1 or "yes")."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False. Received: {name}={value!r}")
    return value


def require_callable(name: str, value: Any, what: str, *, optional: bool = False):
    """``value`` if it is callable (``what`` says what it must be: ``"a function of one record"``),
    or ``None`` when ``optional``."""
    if value is None and optional:
        return None
    if not callable(value):
        _fail(name, what, value, optional)
    return value


def require_text(name: str, value: Any, what: str = "a non-empty string", *, optional: bool = False):
    """``value`` if it is a non-empty ``str``, or ``None`` when ``optional``."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        _fail(name, what, value, optional)
    return value


def require_rate(name: str, value: Any, unit: str = "batches per second"):
    """``value`` if it is a finite number ``>= 0`` (0: unpaced): NaN would stop pacing without a word."""
    if not is_number(value) or not 0 <= value < float("inf"):
        raise ConfigError(f"{name} must be >= 0 {unit} (0: unpaced), a finite number. Received: {name}={value!r}")
    return value
