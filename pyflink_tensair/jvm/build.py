"""Compiles the Java channel into a jar: at package build time (shipped in the wheel) or on first use.

Only the standard library is imported here, so that ``setup.py`` can load this file in a build
environment that has no numpy, TensorFlow or pyflink package to import, only the Flink jars
(``apache-flink-libraries``, a build requirement in ``pyproject.toml``).

A shipped jar comes with ``channel.json``, which names the Flink version it was compiled against and
a digest of the Java sources; :func:`shipped_jar` returns it only while both match what is installed,
so a user who upgrades pyflink falls back to compiling from the shipped sources.

Example::

    >>> len(sources_digest()) == 16 and all(p.endswith(".java") for p in java_sources())
    True
    >>> read_flink_version("/nonexistent") is None
    True
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from typing import List, Optional

SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java")
SHIPPED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
JAR_NAME = "tensair-channel.jar"
MANIFEST_NAME = "channel.json"
JAVA_RELEASE = "11"  # the oldest Java that Flink 2.x runs on: the jar runs on any JRE Flink accepts
INSTALL_HINT = ("Install a JDK 17 (for example 'apt-get install openjdk-17-jdk-headless') and put its "
                "'javac' on PATH, or set JAVA_HOME to it.")


class ChannelBuildError(RuntimeError):
    """No javac, no Flink jars, or javac refused the sources."""


def java_sources() -> List[str]:
    return sorted(glob.glob(os.path.join(SOURCES, "**", "*.java"), recursive=True))


def sources_digest(sources: Optional[List[str]] = None) -> str:
    digest = hashlib.sha256()
    for path in sources if sources is not None else java_sources():
        digest.update(os.path.relpath(path, SOURCES).replace(os.sep, "/").encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def find_flink_home(search_path: Optional[List[str]] = None) -> str:
    """The installed ``pyflink`` folder that holds ``lib/flink-dist-*.jar``, found without importing it."""
    for entry in search_path if search_path is not None else sys.path:
        home = os.path.join(entry or os.getcwd(), "pyflink")
        if glob.glob(os.path.join(home, "lib", "flink-dist*.jar")):
            return os.path.abspath(home)
    raise ChannelBuildError("no pyflink/lib/flink-dist-*.jar on sys.path: is apache-flink installed correctly?")


def read_flink_version(home: str) -> Optional[str]:
    """``pyflink/version.py``'s ``__version__``, read as text (importing pyflink needs its dependencies)."""
    try:
        with open(os.path.join(home, "version.py"), encoding="utf-8") as f:
            found = re.search(r"""__version__\s*=\s*["']([^"']+)["']""", f.read())
    except OSError:
        return None
    return found.group(1) if found else None


def flink_classpath(home: str) -> List[str]:
    jars = sorted(glob.glob(os.path.join(home, "lib", "*.jar")) + glob.glob(os.path.join(home, "opt", "flink-python*.jar")))
    if not any("flink-dist" in os.path.basename(j) for j in jars):
        raise ChannelBuildError(f"no flink-dist jar under {home}/lib: is apache-flink installed correctly?")
    return jars


def find_javac() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidates = [os.path.join(java_home, "bin", "javac")] if java_home else []
    found = shutil.which("javac")
    if found:
        candidates.append(found)
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise ChannelBuildError(f"javac was not found: the feedback channel is compiled from Java source. {INSTALL_HINT}")


def compile_jar(target: str, classpath: List[str], sources: Optional[List[str]] = None) -> str:
    """Compiles the sources into ``target``, written atomically (concurrent builders never see half a jar)."""
    sources = sources if sources is not None else java_sources()
    javac = find_javac()
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tensair-javac-") as build:
        command = [javac, "--release", JAVA_RELEASE, "-nowarn", "-d", build, "-cp", os.pathsep.join(classpath), *sources]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True)
        except subprocess.CalledProcessError as err:
            raise ChannelBuildError(f"compiling the feedback channel failed:\n{err.stderr}") from None
        except OSError as err:
            raise ChannelBuildError(f"running {javac} failed: {err}. {INSTALL_HINT}") from None
        partial = f"{target}.{os.getpid()}.tmp"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: pyflink_tensair\n\n")
            for path in sorted(glob.glob(os.path.join(build, "**", "*.class"), recursive=True)):
                jar.write(path, os.path.relpath(path, build))
        os.replace(partial, target)
    return target


def ship(target_dir: str, flink_home: Optional[str] = None) -> str:
    """Build time: compiles the jar into ``target_dir`` with the manifest that :func:`shipped_jar` checks."""
    home = flink_home or find_flink_home()
    version = read_flink_version(home)
    if version is None:
        raise ChannelBuildError(f"no __version__ in {home}/version.py")
    sources = java_sources()
    jar = compile_jar(os.path.join(target_dir, JAR_NAME), flink_classpath(home), sources)
    with open(os.path.join(target_dir, MANIFEST_NAME), "w", encoding="utf-8") as f:
        json.dump({"flink_version": version, "sources_digest": sources_digest(sources), "java_release": JAVA_RELEASE,
                   "classes": sorted(n for n in zipfile.ZipFile(jar).namelist() if n.endswith(".class"))}, f, indent=1)
    return jar


def shipped_jar(flink_version: Optional[str], shipped_dir: str = SHIPPED_DIR) -> Optional[str]:
    """The jar shipped in the package, if it was compiled from these sources against this Flink version."""
    try:
        with open(os.path.join(shipped_dir, MANIFEST_NAME), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    jar = os.path.join(shipped_dir, JAR_NAME)
    if (os.path.isfile(jar) and manifest.get("flink_version") == flink_version
            and manifest.get("sources_digest") == sources_digest()):
        return jar
    return None
