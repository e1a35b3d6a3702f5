"""The documentation says what the code does: the generated reference pages are current."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _make_reference():
    spec = importlib.util.spec_from_file_location("make_reference", os.path.join(ROOT, "docs", "make_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_pages_are_made_from_the_current_code(capsys):
    """A config field or a job flag changed without ``python docs/make_reference.py`` fails here."""
    assert _make_reference().main(["--check"]) == 0, capsys.readouterr().err


def test_the_reference_check_names_a_stale_page(tmp_path, capsys):
    make = _make_reference()
    assert make.main(["--out", str(tmp_path)]) == 0
    (tmp_path / "config.md").write_text((tmp_path / "config.md").read_text().replace("| `replicas` | `--replicas` | `int` | `1` |",
                                                                                    "| `replicas` | `--replicas` | `int` | `2` |"))
    capsys.readouterr()
    assert make.main(["--check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "config.md" in err and "jobs.md" not in err, err
    for field in ("replicas", "staleness_bound", "interval_s", "window", "average_every", "bad_input"):
        assert f"| `{field}` |" in (tmp_path / "config.md").read_text()  # every field has its row


def _bash_commands():
    """Every command of this project in a ```bash block of the README and the guide:
    ``(page, module or script, args)``."""
    import glob
    import re
    import shlex

    pages = [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "guide", "*.md")))]
    for page in pages:
        for block in re.findall(r"```bash\n(.*?)```", open(page, encoding="utf-8").read(), re.S):
            for line in block.splitlines():
                words = shlex.split(line, comments=True)
                if len(words) < 2 or not words[0].endswith("python"):
                    continue
                if words[1] == "-m" and words[2].split(".")[0] in ("pyflink_tensair", "benchmarks"):
                    yield os.path.relpath(page, ROOT), words[2], words[3:]
                elif words[1].startswith("jobs/"):
                    yield os.path.relpath(page, ROOT), words[1], words[2:]


class _Parsed(Exception):
    def __init__(self, namespace):
        super().__init__("parsed")
        self.namespace = namespace


def _parse_only(target, args, monkeypatch):
    """``target``'s command line parsed as ``main(args)`` would, and nothing run: the namespace."""
    import argparse
    import importlib
    import importlib.util

    original = argparse.ArgumentParser.parse_args

    def parse_args(self, args=None, namespace=None):
        raise _Parsed(original(self, args, namespace))

    if target.endswith(".py"):
        spec = importlib.util.spec_from_file_location(f"_doc_{os.path.basename(target)[:-3]}", os.path.join(ROOT, target))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target if target != "benchmarks" else "benchmarks.__main__")
    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
        try:
            module.main(list(args))
        except _Parsed as parsed:
            return parsed.namespace
    raise AssertionError(f"{target} {' '.join(args)} ran without parsing its command line")


def test_every_documented_command_line_parses(monkeypatch):
    """Each command of the README's and the guide's shell blocks, through its own parser (a
    renamed or removed flag fails here); what a cluster command submits, through the job's. The
    commands themselves run in the tests of what they do (cluster, Kafka, savepoints)."""
    commands = list(_bash_commands())
    assert len(commands) >= 10 and any("stop-with-savepoint" in args for _, _, args in commands)
    for page, target, args in commands:
        try:
            namespace = _parse_only(target, args, monkeypatch)
        except SystemExit as exit:
            raise AssertionError(f"{page}: `{target} {' '.join(args)}` does not parse (exit {exit.code})") from None
        submitted = [a for a in getattr(namespace, "script_args", None) or [] if a != "--"]
        if submitted:
            try:
                _parse_only(submitted[0], submitted[1:], monkeypatch)
            except SystemExit as exit:
                raise AssertionError(f"{page}: the job in `{' '.join(args)}` does not parse (exit {exit.code})") from None
