"""The public entry points' examples run as written: the README's "embed it in your pipeline"
snippet (which is also ``train``'s docstring example) and ``to_batches``' docstring example."""

import inspect
import os
import re
import textwrap

import pytest

pytest.importorskip("pyflink")

from pyflink_tensair import to_batches, train  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_snippet() -> str:
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = readme[readme.index("## Embed it in your pipeline and get the models back"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def docstring_example(function) -> str:
    """The indented block after the docstring's "Example ...::" line."""
    doc = inspect.getdoc(function)
    block = re.search(r"Example[^\n]*::\n\n(.*)", doc, re.S).group(1)
    return textwrap.dedent(block).strip() + "\n"


def test_the_readme_snippet_is_trains_docstring_example():
    assert docstring_example(train) == readme_snippet()


# The snippet itself runs in test_installed_wheel.py, from the installed wheel, outside the checkout.


@pytest.mark.flink
def test_the_to_batches_example_runs_as_written(tmp_path):
    from flink_harness import run_code_here

    example = docstring_example(to_batches)
    result = run_code_here(example, tmp_path)  # as written, in this process
    assert result.returncode == 0, result.stderr[-3000:]
    expected = re.search(r"# (\[.*\])$", example, re.M).group(1)
    assert result.stdout.strip().splitlines()[-1] == expected
