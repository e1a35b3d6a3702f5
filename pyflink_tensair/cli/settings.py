"""The table of settings: every field of :class:`~pyflink_tensair.TrainConfig` and of its
sub-configs, as the jobs' flags and the reference pages show it.

One row per field: its path (``("peer_updates", "scale")``), its flag (the path joined with
``-``: ``--peer-updates-scale``), its type, its choices and its help (the first sentence of the
field's entry in its class's ``Attributes:`` docstring). ``None`` is written ``none`` on a
command line, as in the config. :mod:`pyflink_tensair.cli.flags` makes the flags from it;
``docs/make_reference.py`` the reference page::

    >>> rows = {row.flag: row for row in settings()}
    >>> rows["--peer-updates-scale"].path, rows["--staleness-bound"].optional
    (('peer_updates', 'scale'), True)
    >>> rows["--python-in"].choices
    ('jvm', 'processes', 'client')
    >>> rows["--checkpoints-interval-s"].help
    'seconds between checkpoints (at least 0.01).'
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import typing
from typing import Any, Dict, List, Optional, Tuple

from ..config import TrainConfig


@dataclasses.dataclass(frozen=True)
class Setting:
    """One configuration field: where it sits, what it takes, what it means."""

    path: Tuple[str, ...]
    owner: type  # the dataclass the field belongs to
    kind: Any  # int, float, bool, str or an Enum class
    optional: bool  # None allowed ("none" on a command line)
    choices: Optional[Tuple[str, ...]]
    help: str
    description: str  # the docstring's whole entry
    switch: bool = False  # the first field of an optional sub-config: None turns the sub-config off

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def flag(self) -> str:
        return "--" + "-".join(self.path).replace("_", "-")

    @property
    def dest(self) -> str:
        return "config." + ".".join(self.path)


def attributes(cls) -> Dict[str, str]:
    """``name -> description`` from the ``Attributes:`` section of ``cls``'s docstring."""
    doc = inspect.getdoc(cls) or ""
    section = doc.split("Attributes:", 1)[1] if "Attributes:" in doc else ""
    section = re.split(r"\n\S", section, maxsplit=1)[0]  # up to the next unindented line
    entries: Dict[str, str] = {}
    name = None
    for line in section.splitlines():
        match = re.match(r"^    (\w+): ?(.*)$", line)
        if match:
            name = match.group(1)
            entries[name] = match.group(2).strip()
        elif name and line.strip():
            entries[name] += " " + line.strip()
    return entries


def plain(text: str) -> str:
    """reST markup as plain text: ``x`` -> x, :class:`~a.B` -> B."""
    text = re.sub(r":\w+:`~?(?:[\w.]+\.)?([\w.]+)`", r"\1", text)
    return text.replace("``", "")


def first_sentence(text: str) -> str:
    match = re.match(r"(.+?(?<!e\.g)(?<!i\.e)\.)(\s|$)", text)
    return match.group(1) if match else text


def _unwrap(annotation) -> Tuple[Any, bool]:
    """``(type, optional)`` of ``Optional[T]`` or ``T``."""
    if typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0], True
    return annotation, False


def settings(cls: type = TrainConfig, prefix: Tuple[str, ...] = (), optional: bool = False) -> List[Setting]:
    """The rows of ``cls`` and of the dataclasses in its fields, in field order; fields whose
    metadata says ``flag: False`` and dict fields are left out. ``optional``: ``cls`` is reached
    through a field that may be ``None`` (its first row is the switch)."""
    hints = typing.get_type_hints(cls)
    entries = attributes(cls)
    optional_owner = optional
    rows: List[Setting] = []
    for field in dataclasses.fields(cls):
        if field.metadata.get("flag", True) is False:
            continue
        kind, optional = _unwrap(hints[field.name])
        path = prefix + (field.name,)
        if dataclasses.is_dataclass(kind):
            rows += settings(typing.cast(type, kind), path, optional)
            continue
        if kind not in (int, float, bool, str) and not (isinstance(kind, type) and issubclass(kind, enum.Enum)):
            continue  # e.g. AutoSettings.detector_parameters (a dict): Python only
        choices = field.metadata.get("choices")
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            choices = tuple(member.value for member in kind)
        description = plain(entries.get(field.name, ""))
        switch = optional_owner and field is dataclasses.fields(cls)[0]
        rows.append(Setting(path, cls, kind, optional, tuple(choices) if choices else None,
                            first_sentence(description), description, switch))
    return rows


def value_at(config, path: Tuple[str, ...]):
    """The value of ``path`` in ``config`` (``None`` where a sub-config on the way is ``None``)."""
    for name in path:
        if config is None:
            return None
        config = getattr(config, name)
    return config.value if isinstance(config, enum.Enum) else config


def default_of(owner: type, name: str):
    """The field's default in its class (``dataclasses.MISSING`` if it has none)."""
    field = next(f for f in dataclasses.fields(owner) if f.name == name)
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING
