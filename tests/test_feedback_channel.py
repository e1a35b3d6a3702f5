"""The Java feedback channel: compiled from source against pyflink's jars, cached, clear when no JDK."""

import os
import zipfile

import pytest

pytest.importorskip("pyflink")

from pyflink_tensair import JavaToolchainError  # noqa: E402
from pyflink_tensair import feedback  # noqa: E402


def test_the_jar_is_built_once_per_source_version_and_holds_the_channel(tmp_path, monkeypatch):
    monkeypatch.setenv("PYFLINK_TENSAIR_CACHE", str(tmp_path))
    path = feedback.channel_jar()
    assert path.startswith(str(tmp_path)) and path.endswith(".jar")
    names = zipfile.ZipFile(path).namelist()
    for cls in ("FeedbackSink", "FeedbackSource", "FeedbackQueues"):
        assert f"pyflinktensair/feedback/{cls}.class" in names
    modified = os.path.getmtime(path)
    assert feedback.channel_jar() == path and os.path.getmtime(path) == modified  # cached


def test_a_missing_jdk_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PYFLINK_TENSAIR_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JavaToolchainError, match="javac was not found.*Install a JDK 17"):
        feedback.channel_jar()
