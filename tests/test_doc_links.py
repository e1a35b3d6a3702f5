"""Docs that cannot drift silently: every relative link, every cited repository path and every
cited import path in README.md, CHANGELOG.md and docs/**/*.md, and in the docstrings and comments
of pyflink_tensair/, jobs/ and benchmarks/, exists.

What counts, per page:

- **Links**: every Markdown link or image ``[text](target)`` and reference definition
  ``[name]: target`` outside code, whose target has no scheme (``https:``, ``mailto:``): the path
  must exist relative to the page (a file or a folder; ``/path`` relative to the repository's
  root), and an anchor (``page.md#heading``, ``#heading``) must be the GitHub slug of one of that
  page's headings.
- **Cited paths**: a path under one of the repository's tracked top folders (:data:`CITED_FOLDERS`),
  anywhere in the text (prose, inline code, code blocks), relative to the repository's root: it
  must exist (a file or a folder). ``file.py::name`` must also define ``name`` (a test, a class).
  A path followed by a glob or template character (``*``, ``{``, ``<``, ``[``) is a pattern, not a
  citation; the few placeholders and output folders are in :data:`NOT_CITED`, each with its reason.
  Paths outside those folders (``runs/online.json``, ``.flink``, ``dist/...whl``) are what a
  command writes, not citations, and are not checked.
- **Import paths**: ``pyflink_tensair.a.b`` (and ``from pyflink_tensair.a import b, c``) must
  resolve: the longest prefix that is a module is found with ``importlib.util.find_spec``
  (importing only the packages' ``__init__``, which import nothing heavy), then each remaining
  name must be defined in that module's source (read with ``ast``, so TensorFlow is not imported
  for it) or, failing that, be an attribute of the imported module (the packages' lazy exports).

Python files: only their docstrings and comments are read (a path in code is what the code
opens, not a citation).
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import io
import os
import re
import tokenize
import urllib.parse
from typing import Iterator, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The repository's tracked top folders: a path under one of them in the docs is a citation.
CITED_FOLDERS = ("tests", "jobs", "docs", "benchmarks", "pyflink_tensair", ".ci")

# Paths under those folders that are not citations of a file that must exist, with the reason.
NOT_CITED = {
    "jobs/NAME.py": "a placeholder for any job's file (`python jobs/NAME.py`)",
    "jobs/X.py": "a placeholder for any job's file in the journal's table of CI's time",
    "benchmarks/results/": "where the benchmark commands write their results; git ignores the folder",
}

# The folders whose Python files' docstrings and comments are checked, and the pages.
PYTHON_FOLDERS = ("pyflink_tensair", "jobs", "benchmarks")

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})[^\n]*\n.*?^ {0,3}\2[`~]*[ \t]*$", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_LINK = re.compile(r"\]\(\s*(<[^>\n]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]\n]+\]:\s*(\S+)", re.M)
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
_HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)=[\"']([^\"']+)[\"']", re.I)
_SCHEME = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:|//)")
_PATH = re.compile(r"(?<![\w./~$<>@:-])((?:%s)/[\w.-]+(?:/[\w.-]+)*/?)((?:::\w+)+)?"
                   % "|".join(re.escape(f) for f in CITED_FOLDERS))
_DOTTED = re.compile(r"(?<![\w./-])pyflink_tensair(?:\.\w+)+")
_FROM_IMPORT = re.compile(r"\bfrom[ \t]+(pyflink_tensair(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)")


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _blank(match: re.Match) -> str:
    """The match's text with everything but its line breaks made spaces: offsets stay where they were."""
    return re.sub(r"[^\n]", " ", match.group(0))


def _outside_code(text: str) -> str:
    """The Markdown without its fenced blocks and code spans (blanked, so offsets and lines hold)."""
    return _CODE_SPAN.sub(_blank, _FENCE.sub(_blank, text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: links and images by their text, inline markup and
    punctuation dropped (letters, digits, ``_`` and ``-`` kept), lower case, spaces as ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set:
    """Every anchor a Markdown page has: its headings' slugs (a repeated one numbered ``-1``,
    ``-2``, ... as GitHub does) and its HTML anchors."""
    seen: dict = {}
    found = set(_HTML_ANCHOR.findall(text))
    for match in _HEADING.finditer(_FENCE.sub(_blank, text)):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def _not_cited(path: str) -> Optional[str]:
    for known, reason in NOT_CITED.items():
        if path == known or (known.endswith("/") and path.startswith(known)):
            return reason
    return None


def _defines(source: str, name: str) -> bool:
    return re.search(rf"^[ \t]*(?:async[ \t]+def|def|class)[ \t]+{re.escape(name)}\b", source, re.M) is not None


def cited_paths(text: str) -> Iterator[Tuple[int, str, Sequence[str]]]:
    """``(offset, path, names)`` of every repository path ``text`` cites (``names``: the
    ``::name`` parts after it), patterns and :data:`NOT_CITED` left out."""
    for match in _PATH.finditer(text):
        path, names = match.group(1), match.group(2)
        if not names:
            path = path.rstrip(".")  # the end of a sentence
        after = text[match.end():match.end() + 1]
        if after and after in "*{<[(" or path.endswith("/.") or _not_cited(path):
            continue
        yield match.start(), path, [n for n in (names or "").split("::") if n]


def path_problem(path: str, names: Sequence[str], root: str) -> Optional[str]:
    """What is wrong with citing ``path`` (and ``path::names``) in the repository at ``root``."""
    full = os.path.join(root, path)
    if not os.path.exists(full):
        return f"cites {path}, which does not exist"
    if names and os.path.isfile(full):
        with open(full, encoding="utf-8") as f:
            source = f.read()
        missing = [n for n in names if not _defines(source, n)]
        if missing:
            return f"cites {path}::{'::'.join(names)}, but {path} defines no {missing[0]}"
    return None


def import_paths(text: str) -> Iterator[Tuple[int, str]]:
    """``(offset, dotted name)`` of every import path of the package in ``text``: dotted names,
    and each name of ``from pyflink_tensair... import ...``."""
    for match in _DOTTED.finditer(text):
        if text[match.end():match.end() + 1] in ("-", "/"):
            continue  # a file or folder name (pyflink_tensair.egg-info), not an import path
        yield match.start(), match.group(0)
    for match in _FROM_IMPORT.finditer(text):
        for item in match.group(2).strip("()").split(","):
            words = item.split()
            if words and words[0].isidentifier():
                yield match.start(), f"{match.group(1)}.{words[0]}"


def _top_level_names(body: list, names: set) -> set:
    """Names a module (or class) body binds, ``if TYPE_CHECKING:`` blocks left out."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.dump(node.test):
                _top_level_names(node.body + node.orelse, names)
        elif isinstance(node, ast.Try):
            _top_level_names(node.body + node.orelse + node.finalbody
                             + [n for h in node.handlers for n in h.body], names)
        elif isinstance(node, ast.With):
            _top_level_names(node.body, names)
    return names


def _defined_in_source(origin: Optional[str], names: Sequence[str]) -> bool:
    """Whether the module file ``origin`` defines ``names[0]`` (and, for a class, ``names[1]``
    in its body), read without importing it."""
    if not origin or not origin.endswith(".py") or len(names) > 2:
        return False
    with open(origin, encoding="utf-8") as f:
        body = ast.parse(f.read()).body
    if names[0] not in _top_level_names(body, set()):
        return False
    if len(names) == 1:
        return True
    classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == names[0]]
    return any(names[1] in _top_level_names(c.body, set()) for c in classes)


@functools.lru_cache(maxsize=None)
def import_problem(dotted: str) -> Optional[str]:
    """What is wrong with the import path ``dotted`` (None: it resolves)."""
    parts = dotted.split(".")
    module, spec = parts[0], importlib.util.find_spec(parts[0])
    if spec is None:
        return f"cites {dotted}, but there is no module {parts[0]}"
    rest = parts[1:]
    while rest and spec.submodule_search_locations is not None:
        try:
            sub = importlib.util.find_spec(f"{module}.{rest[0]}")
        except Exception as err:  # the package's __init__ failed
            return f"cites {dotted}: importing {module} fails ({err!r})"
        if sub is None:
            break
        module, spec, rest = f"{module}.{rest[0]}", sub, rest[1:]
    if not rest or _defined_in_source(spec.origin, rest):
        return None
    try:
        found = importlib.import_module(module)
    except Exception as err:
        return f"cites {dotted}: importing {module} fails ({err!r})"
    for i, name in enumerate(rest):
        try:
            found = getattr(found, name)
        except AttributeError:
            return f"cites {dotted}, but {'.'.join([module, *rest[:i]])} has no {name}"
    return None


def _reference_problems(text: str, where, root: str) -> List[str]:
    """Cited paths and import paths in ``text``; ``where(offset)`` names the place."""
    problems = []
    for offset, path, names in cited_paths(text):
        problem = path_problem(path, names, root)
        if problem:
            problems.append(f"{where(offset)}: {problem}")
    for offset, dotted in import_paths(text):
        problem = import_problem(dotted)
        if problem:
            problems.append(f"{where(offset)}: {problem}")
    return problems


def markdown_problems(text: str, page: str, root: str = ROOT) -> List[str]:
    """Everything wrong in the Markdown ``text`` of the page at path ``page`` (links are relative
    to its folder; cited paths to the repository ``root``), as ``page:line: what``."""
    name = os.path.relpath(page, root) if os.path.isabs(page) else page
    page = os.path.join(root, page) if not os.path.isabs(page) else page

    def where(offset):
        return f"{name}:{_line(text, offset)}"

    problems = []
    prose = _outside_code(text)
    targets = [(m.start(), m.group(1)) for m in _LINK.finditer(prose)]
    targets += [(m.start(), m.group(1)) for m in _REFERENCE.finditer(prose)]
    for offset, target in sorted(targets):
        target = target.strip("<>")
        if _SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        path = urllib.parse.unquote(path)
        if path.startswith("/"):
            full = os.path.join(root, path.lstrip("/"))
        else:
            full = os.path.join(os.path.dirname(page), path)
        if path and not os.path.exists(full):
            problems.append(f"{where(offset)}: links to {target}, but {path} does not exist")
            continue
        if anchor and (not path or full.endswith(".md")) and os.path.isfile(full if path else page):
            with open(full if path else page, encoding="utf-8") as f:
                if anchor not in anchors(f.read() if path else text):
                    problems.append(f"{where(offset)}: links to {target}, but "
                                    f"{path or name} has no heading with the anchor #{anchor}")
    return problems + _reference_problems(text, where, root)


def _docstrings_and_comments(source: str) -> Iterator[Tuple[int, str]]:
    """``(first line, text)`` of every docstring and comment of a Python source."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            value = getattr(first, "value", None)
            if isinstance(first, ast.Expr) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                yield first.lineno, value.value
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def python_problems(source: str, path: str, root: str = ROOT) -> List[str]:
    """Everything wrong in the docstrings and comments of the Python ``source`` of ``path``."""
    name = os.path.relpath(path, root) if os.path.isabs(path) else path
    problems = []
    for line, text in _docstrings_and_comments(source):
        problems += _reference_problems(text, lambda offset: f"{name}:{line + _line(text, offset) - 1}", root)
    return problems


def pages(root: str) -> List[str]:
    """README.md, CHANGELOG.md and every .md under docs/ that ``root`` has."""
    found = [os.path.join(root, p) for p in ("README.md", "CHANGELOG.md") if os.path.isfile(os.path.join(root, p))]
    for folder, dirs, files in os.walk(os.path.join(root, "docs")):
        dirs.sort()
        found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".md")]
    return found


def python_files(root: str) -> List[str]:
    found = []
    for top in PYTHON_FOLDERS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".py")]
    return found


def tree_problems(root: str = ROOT) -> List[str]:
    """Everything wrong in the pages and the Python files' docstrings and comments under ``root``."""
    problems = []
    for page in pages(root):
        with open(page, encoding="utf-8") as f:
            problems += markdown_problems(f.read(), page, root)
    for path in python_files(root):
        with open(path, encoding="utf-8") as f:
            problems += python_problems(f.read(), path, root)
    return problems


def section(text: str, anchor: str) -> Optional[str]:
    """The part of a Markdown page under the heading whose anchor is ``anchor``, up to the next
    heading of the same or a higher level (None: no such heading)."""
    headings = list(_HEADING.finditer(_FENCE.sub(_blank, text)))
    seen: dict = {}
    for i, match in enumerate(headings):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        if (base if count == 0 else f"{base}-{count}") == anchor:
            level = len(match.group(1))
            end = next((h.start() for h in headings[i + 1:] if len(h.group(1)) <= level), len(text))
            return text[match.start():end]
    return None


_SOURCE = re.compile(r"\[([^\]]*)\]\((docs/(?:measurements|benchmarks)\.md[^)]*)\)")
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
_FIGURE = re.compile(r"(?<![\d.])\d+\.\d+(?![\d.]*\d)")


def status_problems(readme: str, root: str = ROOT) -> List[str]:
    """What is wrong with the README's "Status and known limits": each bullet that links its
    source (an entry of docs/measurements.md, or docs/benchmarks.md) must name the source's date
    as the link's text, and every decimal figure of the bullet must be in that source."""
    start = readme.index("**Status and known limits**")
    bullets = re.split(r"\n- ", readme[start:readme.index("\n## ", start)])[1:]
    problems, sourced = [], 0
    for bullet in bullets:
        sources = [(label, target) for label, target in _SOURCE.findall(bullet) if target != "docs/measurements.md"]
        if not sources:
            continue
        sourced += 1
        texts = []
        for label, target in sources:
            path, _, anchor = target.partition("#")
            with open(os.path.join(root, path), encoding="utf-8") as f:
                page = f.read()
            text = section(page, anchor) if anchor else page
            if text is None:
                problems.append(f"the status links {target}, which has no such section")
                continue
            dates = set(_DATE.findall(text.splitlines()[0] if anchor else text))
            if not _DATE.fullmatch(label) or label not in dates:
                problems.append(f"the status links {target} as [{label}]: the link's text must be its date "
                                f"({', '.join(sorted(dates)) or 'none found'})")
            texts.append(text)
        for figure in _FIGURE.findall(bullet):
            if not any(re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d])", t) for t in texts):
                problems.append(f"the status says {figure}, which its source does not: {bullet[:70]!r}...")
    if sourced < 3:
        problems.append(f"only {sourced} bullets of the status link the dated measurement they come from")
    return problems


def test_the_readmes_status_figures_are_dated_and_in_the_measurements_they_link():
    """A status figure changed without its measurement, or a measurement cited without its date, fails here."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert not status_problems(readme), "\n".join(status_problems(readme))
    assert status_problems(readme.replace("0.98x", "0.99x", 1)) == [
        "the status says 0.99, which its source does not: " + next(
            repr(b[:70]) for b in readme.replace("0.98x", "0.99x", 1).split("\n- ") if "0.99x" in b) + "..."]
    assert "the link's text must be its date" in status_problems(readme.replace("[2026-12-06]", "[2026-12-05]", 1))[0]


def test_every_link_cited_path_and_import_path_in_the_docs_exists():
    """A renamed, moved or removed file, test, heading or name that a page or a docstring still
    cites fails here, with the place that cites it."""
    problems = tree_problems()
    assert not problems, "\n".join(problems)


_BROKEN_PAGE = """# A page

## Where things are

- [the README](../README.md), [this page's section](#where-things-are), [a folder](.)
- [a page that is not there](missing.md) and [a heading that is not there](#nowhere)
- `tests/test_doc_links.py::test_the_checker_fails_on_what_it_checks`, `jobs/quickstart.py`,
  `pyflink_tensair.config.TrainConfig`, `pyflink_tensair.models.export.latest_export`
- `tests/test_no_such_file.py`, `tests/test_doc_links.py::test_no_such_test`, `pyflink_tensair.latest_export`
- not citations: `runs/online.json`, `tests/test_*.py`, `jobs/NAME.py`, `benchmarks/results/x.jsonl`

```python
from pyflink_tensair.config import TrainConfig, NoSuchConfig
[not a link](nowhere.md)
```
"""


def test_the_checker_fails_on_what_it_checks(tmp_path):
    """The checker itself can fail: a broken link and anchor, a missing cited file and test, an
    import path that does not resolve (in a page and in a docstring); nothing else on the page."""
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text(_BROKEN_PAGE)
    (tmp_path / "README.md").write_text("[the page](docs/page.md#where-things-are) [gone](docs/gone.md)\n")
    problems = markdown_problems(_BROKEN_PAGE, str(page), ROOT)
    assert problems == [
        f"{os.path.relpath(page, ROOT)}:6: links to missing.md, but missing.md does not exist",
        f"{os.path.relpath(page, ROOT)}:6: links to #nowhere, but {os.path.relpath(page, ROOT)} has no heading "
        "with the anchor #nowhere",
        f"{os.path.relpath(page, ROOT)}:9: cites tests/test_no_such_file.py, which does not exist",
        f"{os.path.relpath(page, ROOT)}:9: cites tests/test_doc_links.py::test_no_such_test, but "
        "tests/test_doc_links.py defines no test_no_such_test",
        f"{os.path.relpath(page, ROOT)}:9: cites pyflink_tensair.latest_export, but pyflink_tensair has no "
        "latest_export",
        f"{os.path.relpath(page, ROOT)}:13: cites pyflink_tensair.config.NoSuchConfig, but pyflink_tensair.config has "
        "no NoSuchConfig",
    ], "\n".join(problems)

    # a folder: its README and its docs/ pages, paths relative to it
    (tmp_path / "pyflink_tensair").mkdir()
    (tmp_path / "pyflink_tensair" / "module.py").write_text(
        '"""Example (``tests/test_gone.py`` runs it)."""\n\n'
        "def f():\n    # docs/page.md has it; docs/gone.md had it\n"
        '    return "docs/not_a_citation.md"\n')
    found = tree_problems(str(tmp_path))
    assert "README.md:1: links to docs/gone.md, but docs/gone.md does not exist" in found, found
    assert not any("README.md" in p and "page.md" in p for p in found), found
    assert [p for p in found if p.startswith("pyflink_tensair")] == [
        "pyflink_tensair/module.py:1: cites tests/test_gone.py, which does not exist",
        "pyflink_tensair/module.py:4: cites docs/gone.md, which does not exist",
    ], found


def test_anchors_are_githubs_heading_slugs():
    assert slug("2026-12-06: one replica against Keras's `train_on_batch`, and the cores (issue 27)") == \
        "2026-12-06-one-replica-against-kerass-train_on_batch-and-the-cores-issue-27"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n## B: [c](d.md)\n") == {"a", "a-1", "b-c"}
