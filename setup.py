"""Metadata lives in pyproject.toml; this file only compiles the Java channel into the wheel."""

import importlib.util
import os
import warnings

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _channel_build():
    """pyflink_tensair/jvm/build.py, loaded alone: the package's imports are not installed here."""
    spec = importlib.util.spec_from_file_location("_tensair_channel_build",
                                                  os.path.join(HERE, "pyflink_tensair", "jvm", "build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithChannel(build_py):
    """Adds ``pyflink_tensair/jvm/lib/tensair-channel.jar`` (and its manifest) to the build."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install compiles on first use, from the checkout's sources
        build = _channel_build()
        target = os.path.join(self.build_lib, "pyflink_tensair", "jvm", "lib")
        try:
            jar = build.ship(target)
        except build.ChannelBuildError as err:
            if os.environ.get("PYFLINK_TENSAIR_REQUIRE_JAR"):
                raise
            warnings.warn(f"the wheel ships no compiled Java channel ({err}); it will be compiled on first use")
            return
        print(f"compiled the Java channel into {jar}")


setup(cmdclass={"build_py": BuildPyWithChannel})
