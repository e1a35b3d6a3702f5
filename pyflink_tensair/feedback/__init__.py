"""The Java feedback channel: compiled from the sources beside this file, cached, added to jobs.

Flink 2.x has no iterations, and Python cannot define sources, so the gradient loop closes through
a small Java sink/source pair sharing an in-JVM queue (see ``java/``). :func:`channel_jar`
compiles it with ``javac`` against the jars of the installed pyflink, once per source version,
into the user's cache folder; ``flink run`` ships it with the job.

Example::

    >>> path = channel_jar()          # doctest: +SKIP
    >>> path.endswith(".jar")         # doctest: +SKIP
    True
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile

from ..cache import cache_dir
from ..errors import JavaToolchainError

_SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java")
_INSTALL_HINT = ("Install a JDK 17 (for example 'apt-get install openjdk-17-jdk-headless') and put its "
                 "'javac' on PATH, or set JAVA_HOME to it.")


def find_javac() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidates = [os.path.join(java_home, "bin", "javac")] if java_home else []
    found = shutil.which("javac")
    if found:
        candidates.append(found)
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise JavaToolchainError(f"javac was not found: the feedback channel is compiled from Java source. {_INSTALL_HINT}")


def flink_classpath() -> list:
    import pyflink

    home = os.path.dirname(os.path.abspath(pyflink.__file__))
    jars = sorted(glob.glob(os.path.join(home, "lib", "*.jar")) + glob.glob(os.path.join(home, "opt", "flink-python*.jar")))
    if not any("flink-dist" in os.path.basename(j) for j in jars):
        raise JavaToolchainError(f"no flink-dist jar under {home}/lib: is apache-flink installed correctly?")
    return jars


def _java_sources() -> list:
    return sorted(glob.glob(os.path.join(_SOURCES, "**", "*.java"), recursive=True))


def _fingerprint(sources: list, classpath: list) -> str:
    digest = hashlib.sha256()
    for path in sources:
        digest.update(os.path.relpath(path, _SOURCES).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    for jar in classpath:
        digest.update(os.path.basename(jar).encode())
    return digest.hexdigest()[:16]


def channel_jar() -> str:
    """Returns the path of the compiled feedback-channel jar, building it on first use."""
    sources = _java_sources()
    classpath = flink_classpath()
    target = os.path.join(cache_dir(), f"tensair-feedback-{_fingerprint(sources, classpath)}.jar")
    if os.path.isfile(target):
        return target
    javac = find_javac()
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tensair-javac-") as build:
        command = [javac, "--release", "11", "-nowarn", "-d", build, "-cp", os.pathsep.join(classpath), *sources]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True)
        except subprocess.CalledProcessError as err:
            raise JavaToolchainError(f"compiling the feedback channel failed:\n{err.stderr}") from None
        except OSError as err:
            raise JavaToolchainError(f"running {javac} failed: {err}. {_INSTALL_HINT}") from None
        partial = target + f".{os.getpid()}.tmp"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: pyflink_tensair\n\n")
            for path in sorted(glob.glob(os.path.join(build, "**", "*.class"), recursive=True)):
                jar.write(path, os.path.relpath(path, build))
        os.replace(partial, target)  # atomic: concurrent builders never see half a jar
    return target
