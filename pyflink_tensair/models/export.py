"""Model export while training: replica 0's current model as a ``.keras`` file every few seconds.

Each export is written under a hidden temporary name in the export folder and then renamed, so a
reader never sees half a file: ``model-v<version>.keras`` appears whole or not at all. The
version is the replica's model version (local steps plus applied peer messages), zero-padded so
the names sort by it. An export is a plain Keras model (weights and optimizer state): it loads
with ``keras.models.load_model`` and is the pre-trained start of a new job (the jobs'
``--model PATH``), which is also how a run changes its replica count.

Example::

    >>> import tempfile, keras
    >>> from pyflink_tensair.models import zoo
    >>> folder = tempfile.mkdtemp()
    >>> exporter = ModelExporter(folder, every_s=60.0)
    >>> path = exporter.export(zoo.quickstart_classifier(features=4, classes=2), version=7)
    >>> os.path.basename(path), [v for v, _ in exported_models(folder)]
    ('model-v000000007.keras', [7])
    >>> keras.models.load_model(path).input_shape
    (None, 4)
"""

from __future__ import annotations

import os
import re
import time
from typing import Callable, List, Mapping, Optional, Tuple

from ..embeddings.maps import ids_path, write_id_maps
from ..errors import ConfigError
from ..validation import is_number

_NAME = re.compile(r"^model-v(\d+)\.keras$")


def export_path(directory: str, version: int) -> str:
    """Where the export of ``version`` goes."""
    return os.path.join(directory, f"model-v{int(version):09d}.keras")


def exported_models(directory: str) -> List[Tuple[int, str]]:
    """``(version, path)`` of every export in ``directory``, oldest version first."""
    if not os.path.isdir(directory):
        return []
    found = ((_NAME.match(name), name) for name in os.listdir(directory))
    return sorted((int(m.group(1)), os.path.join(directory, name)) for m, name in found if m)


def latest_export(directory: str) -> Optional[str]:
    """The path of the newest export in ``directory``, or ``None``."""
    exports = exported_models(directory)
    return exports[-1][1] if exports else None


class ModelExporter:
    """Writes a Keras model to ``directory`` when :meth:`due` (every ``every_s`` seconds, counted
    from the end of the last export; never while one is pending)."""

    def __init__(self, directory: str, every_s: float, clock: Callable[[], float] = time.monotonic):
        if not isinstance(directory, str) or not directory:
            raise ConfigError(f"the export folder must be a non-empty path. Received: {directory!r}")
        if not is_number(every_s) or not every_s > 0:
            raise ConfigError(f"the export interval must be a number of seconds > 0. Received: {every_s!r}")
        self.directory = directory
        self.every_s = float(every_s)
        self._clock = clock
        self._next = clock() + self.every_s
        self._pending = False
        self.exports = 0

    def check_folder(self) -> None:
        """Creates the folder; a :class:`ConfigError` that says why if it cannot be written."""
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as err:
            raise ConfigError(f"cannot create the export folder {self.directory!r} ({err.strerror}): give "
                              "export_dir (--exports-dir) a folder the TaskManagers can write") from None
        if not os.access(self.directory, os.W_OK | os.X_OK):
            raise ConfigError(f"the export folder {self.directory!r} is not writable: give export_dir "
                              "(--exports-dir) a folder the TaskManagers can write")

    def due(self) -> bool:
        """True once per interval: the caller then exports (and nothing more is due until it did)."""
        if self._pending or self._clock() < self._next:
            return False
        self._pending = True
        return True

    def export(self, keras_model, version: int, id_maps: Optional[Mapping] = None) -> str:
        """Saves ``keras_model`` as the export of ``version`` (replacing one of the same version,
        as a replica that retrains after a restore does); returns its path. ``id_maps`` (the
        replica's id tables, :mod:`pyflink_tensair.embeddings.maps`) go beside it, in
        ``model-v<version>.ids.json``, swapped in just before the model, so that whoever sees the
        ``.keras`` finds its maps; nothing is swapped in when the model cannot be saved. The next
        interval starts when it is written (or failed)."""
        os.makedirs(self.directory, exist_ok=True)
        final = export_path(self.directory, version)
        maps = ids_path(final)
        stem = os.path.join(self.directory, f".{os.path.basename(final)[:-len('.keras')]}-{os.getpid()}.partial")
        partial, partial_maps = stem + ".keras", stem + ".ids.json"
        try:
            if id_maps:
                write_id_maps(partial_maps, id_maps)
            keras_model.save(partial)
            if id_maps:
                os.replace(partial_maps, maps)
            elif os.path.exists(maps):  # an earlier export of this version's maps are not this model's
                os.remove(maps)
            os.replace(partial, final)
        finally:
            self._pending = False
            self._next = self._clock() + self.every_s
            for path in (partial, partial_maps):
                if os.path.exists(path):
                    os.remove(path)
        self.exports += 1
        return final

    def discard_after(self, version: int) -> List[str]:
        """Removes the exports of versions after ``version`` (a run lost to a failure made them;
        the run restored from a checkpoint at ``version`` trains them again). Returns their paths."""
        removed = [path for v, path in exported_models(self.directory) if v > version]
        for path in removed:
            os.remove(path)
            if os.path.exists(ids_path(path)):
                os.remove(ids_path(path))
        return removed
