"""The folders show the architecture, and these rules keep them honest:

- the core (``core/``, ``drift/``, ``config``, ``settings``, ``errors``, ``cache``, ``testing/``) and the use cases' data
  code (``datasets/``, ``word2vec/``) never import pyflink, TensorFlow or Keras;
- the library proper never imports the use-case code (``datasets/``, ``word2vec/``,
  ``models/zoo``) nor the jobs' command-line code (``cli/``);
- no data path uses pickle;
- no module over 500 lines, no import loop among the package's modules, and no module reads
  another module's classes' underscore members (issue 51).
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
    for path in _sources("core", "drift", "embeddings", "config.py", "settings.py", "errors.py", "cache.py", "testing", "datasets",
                         "word2vec"):
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


MAX_LINES = 500


def test_no_module_is_over_500_lines():
    sizes = {path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert sizes["core/replica.py"] > 100  # the walk found the package
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def _modules():
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def import_graph():
    """Module -> the package's modules it imports, wherever in the module the import is (a
    function's own, or under ``TYPE_CHECKING``). A package's ``__init__`` is a facade that
    re-exports, not a module of its own: ``from ..core import wire`` is an edge to
    ``core.wire``, and no edge leads to or from an ``__init__``."""
    modules = _modules()
    plain = {name for name, path in modules.items() if path.name != "__init__.py"}
    graph = {}
    for name in plain:
        edges = set()
        for imported in _imports(modules[name]):
            if imported in plain and imported != name:
                edges.add(imported)
        graph[name] = edges
    return graph


def import_loops(graph):
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index, low, on_stack, stack, loops, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    loops.append(sorted(component))
    return loops


def test_the_loop_finder_finds_a_loop():
    assert import_loops({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_loops({"a": {"b"}, "b": set()}) == []


def test_no_import_loop_among_the_packages_modules():
    graph = import_graph()
    assert "pyflink_tensair.core.update_rules" in graph["pyflink_tensair.core.replica"]
    assert import_loops(graph) == []


# namedtuple's public methods start with an underscore too
NAMEDTUPLE_API = {"_make", "_replace", "_asdict", "_fields", "_field_defaults"}


def _private_members(tree):
    """The underscore members the classes of a module define: ``{name}``."""
    names = set()
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                names.add(node.name)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.add(node.attr)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node in cls.body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name) and _private(t.id))
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMEDTUPLE_API


def foreign_private_reads(sources):
    """``(module, line, name)`` where a module reads an underscore member (``x._name``, ``x`` not
    ``self`` or ``cls``) that a class of another module defines and no class of its own does.
    ``sources``: module name -> source text."""
    trees = {name: ast.parse(text) for name, text in sources.items()}
    own = {name: _private_members(tree) for name, tree in trees.items()}
    everywhere = set().union(*own.values()) if own else set()
    found = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr in everywhere and node.attr not in own[name]
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.append((name, node.lineno, node.attr))
    return found


def test_the_private_read_finder_finds_one():
    sources = {"a": "class A:\n    def __init__(self):\n        self._x = 1\n",
               "b": "def f(a):\n    return a._x + a._make(1)\n"}
    assert foreign_private_reads(sources) == [("b", 2, "_x")]


def test_no_module_reads_another_modules_classes_underscore_members():
    sources = {name: path.read_text() for name, path in _modules().items()}
    assert foreign_private_reads(sources) == []
