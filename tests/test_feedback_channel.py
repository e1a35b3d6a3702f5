"""The Java feedback channel: compiled from source against pyflink's jars, cached, clear when no JDK."""

import os
import zipfile

import pytest

pytest.importorskip("pyflink")

from pyflink_tensair import JavaToolchainError  # noqa: E402
from pyflink_tensair import jvm  # noqa: E402


def test_the_jar_is_built_once_per_source_version_and_holds_the_channel(tmp_path, monkeypatch):
    monkeypatch.setenv("PYFLINK_TENSAIR_CACHE", str(tmp_path))
    path = jvm.channel_jar()
    assert path.startswith(str(tmp_path)) and path.endswith(".jar")
    names = zipfile.ZipFile(path).namelist()
    for cls in ("FeedbackSink", "FeedbackSource", "FeedbackQueues"):
        assert f"pyflinktensair/feedback/{cls}.class" in names
    modified = os.path.getmtime(path)
    assert jvm.channel_jar() == path and os.path.getmtime(path) == modified  # cached


def test_a_missing_jdk_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PYFLINK_TENSAIR_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JavaToolchainError, match="javac was not found.*Install a JDK 17"):
        jvm.channel_jar()


def _ship_manifest(folder, **fields):
    from pyflink_tensair.jvm import build

    (folder / build.JAR_NAME).write_bytes(b"PK")
    manifest = {"flink_version": jvm.flink_version(), "sources_digest": build.sources_digest(), **fields}
    (folder / build.MANIFEST_NAME).write_text(__import__("json").dumps(manifest))


def test_the_shipped_jar_is_used_only_for_these_sources_and_this_flink(tmp_path):
    from pyflink_tensair.jvm import build

    assert build.shipped_jar(jvm.flink_version(), str(tmp_path)) is None  # nothing shipped (editable install)
    _ship_manifest(tmp_path)
    assert build.shipped_jar(jvm.flink_version(), str(tmp_path)) == str(tmp_path / build.JAR_NAME)
    assert build.shipped_jar("1.20.0", str(tmp_path)) is None  # another pyflink: compile from source instead
    _ship_manifest(tmp_path, sources_digest="0" * 16)
    assert build.shipped_jar(jvm.flink_version(), str(tmp_path)) is None  # sources changed since the build


def test_an_editable_checkout_compiles_when_the_shipped_jar_does_not_fit(tmp_path, monkeypatch):
    from pyflink_tensair.jvm import build

    shipped = tmp_path / "lib"
    shipped.mkdir()
    _ship_manifest(shipped, flink_version="1.20.0")
    monkeypatch.setattr(build, "SHIPPED_DIR", str(shipped))
    monkeypatch.setattr(build.shipped_jar, "__defaults__", (str(shipped),))
    monkeypatch.setenv("PYFLINK_TENSAIR_CACHE", str(tmp_path / "cache"))
    assert jvm.channel_jar().startswith(str(tmp_path / "cache"))
