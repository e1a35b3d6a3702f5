"""The folders show the architecture: the core never imports pyflink (nor TensorFlow)."""

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "pyflink_tensair"


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def test_core_sources_import_no_flink_and_no_tensorflow():
    for path in sorted((PACKAGE / "core").glob("*.py")) + [PACKAGE / "config.py", PACKAGE / "errors.py",
                                                           PACKAGE / "testing.py", PACKAGE / "data.py", PACKAGE / "datasets.py"]:
        for name in _imports(path):
            assert not name.startswith(("pyflink", "tensorflow", "keras")), f"{path.name} imports {name}"


def test_importing_the_core_loads_no_pyflink_module():
    code = ("import sys, pyflink_tensair, pyflink_tensair.core, pyflink_tensair.testing; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pyflink', 'tensorflow', 'keras')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_pickle_on_data_paths():
    for path in PACKAGE.rglob("*.py"):
        for name in _imports(path):
            assert name.split(".")[0] not in ("pickle", "cloudpickle", "dill"), f"{path} imports {name}"
