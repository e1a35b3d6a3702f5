"""The folders show the architecture, and these rules keep them honest:

- the core (``core/``, ``drift/``, ``config``, ``errors``, ``cache``, ``testing/``) and the use cases' data
  code (``datasets/``, ``word2vec/``) never import pyflink, TensorFlow or Keras;
- the library proper never imports the use-case code (``datasets/``, ``word2vec/``,
  ``models/zoo``) nor the jobs' command-line code (``cli/``);
- no data path uses pickle.
"""

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "pyflink_tensair"
USE_CASES = ("pyflink_tensair.datasets", "pyflink_tensair.word2vec", "pyflink_tensair.models.zoo", "pyflink_tensair.cli")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path):
    """Every module ``path`` imports, relative imports resolved to absolute names (``from . import
    x`` yields the package and the package's ``x``)."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def _sources(*names):
    for name in names:
        path = PACKAGE / name
        yield from (sorted(path.rglob("*.py")) if path.is_dir() else [path])


def test_import_resolution_sees_relative_imports():
    names = set(_imports(PACKAGE / "flink" / "training.py"))
    assert {"pyflink_tensair.config", "pyflink_tensair.flink.loop", "pyflink_tensair.flink.types"} <= names


def test_core_and_data_code_import_no_flink_and_no_tensorflow():
    for path in _sources("core", "drift", "embeddings", "config.py", "errors.py", "cache.py", "testing", "datasets", "word2vec"):
        for name in _imports(path):
            assert not name.startswith(("pyflink.", "tensorflow", "keras")) and name != "pyflink", \
                f"{path.relative_to(PACKAGE)} imports {name}"


def test_the_library_never_imports_use_case_or_command_line_code():
    library = [p for p in PACKAGE.rglob("*.py")
               if not _module_name(p).startswith(USE_CASES) and p.name != "_lazy.py"]
    assert PACKAGE / "flink" / "training.py" in library and PACKAGE / "core" / "replica.py" in library
    for path in library:
        for name in _imports(path):
            assert not name.startswith(USE_CASES), f"{path.relative_to(PACKAGE)} imports {name}"


def test_importing_the_core_loads_no_pyflink_module():
    code = ("import sys, pyflink_tensair, pyflink_tensair.core, pyflink_tensair.drift, pyflink_tensair.testing, pyflink_tensair.datasets, "
            "pyflink_tensair.word2vec; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pyflink', 'tensorflow', 'keras')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# The one module that unpickles: it reads the records PyFlink pickled for the user's untyped
# Python objects (PICKLED_BYTE_ARRAY, what a Python operator of the same job gets unpickled by
# PyFlink itself), a chunk at a time. Nothing of ours is ever pickled.
READS_PYFLINKS_PICKLES = {"flink/chunk_batchers.py"}


def test_no_pickle_on_data_paths():
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).as_posix() in READS_PYFLINKS_PICKLES:
            assert "pickle.dumps" not in path.read_text(), f"{path} pickles"
            continue
        for name in _imports(path):
            assert name.split(".")[0] not in ("pickle", "cloudpickle", "dill"), f"{path} imports {name}"
