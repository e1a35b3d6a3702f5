"""The public API is typed: exports visible to type checkers and IDEs, mypy clean (issue 25)."""

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAZY_PACKAGES = ["", "core", "flink", "cli", "cluster", "datasets", "testing", "word2vec"]


def _mypy(*args, cwd=ROOT):
    env = {**os.environ, "MYPYPATH": ROOT}  # the checkout's package, whatever the install mode
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_lazy_export_is_imported_for_type_checkers(package):
    """``_NAMES`` (what ``__getattr__`` loads at run time) and the ``if TYPE_CHECKING:`` imports
    (what mypy and IDEs read) name the same things from the same modules."""
    path = os.path.join(ROOT, "pyflink_tensair", package, "__init__.py")
    tree = ast.parse(open(path).read())
    names = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                 and any(getattr(t, "id", None) == "_NAMES" for t in node.targets))
    checked = next(node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    imported = {alias.name: "." * stmt.level + stmt.module for stmt in checked.body for alias in stmt.names}
    assert imported == names


def test_the_public_modules_are_mypy_clean():
    result = _mypy()  # the files of [tool.mypy] in pyproject.toml
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_a_users_mistake_is_caught_by_mypy_through_the_exports(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("from pyflink_tensair import AutoSettings, TrainConfig, decode_prediction\n"
                      "config: TrainConfig = TrainConfig(replicas=2, auto=AutoSettings(window=20))\n"
                      "bad: TrainConfig = TrainConfig(replicas='2')\n"
                      "reveal_type(decode_prediction)\n")
    result = _mypy("--ignore-missing-imports", str(script), cwd=str(tmp_path))
    lines = result.stdout.splitlines()
    assert any(":3: error:" in line and "replicas" in line for line in lines), result.stdout
    assert not any(":2: error:" in line for line in lines), result.stdout
    assert any(":4: note: Revealed type" in line and "def" in line for line in lines), result.stdout
