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
    (tmp_path / "config.md").write_text((tmp_path / "config.md").read_text().replace("| `replicas` | `int` | `1` |",
                                                                                    "| `replicas` | `int` | `2` |"))
    capsys.readouterr()
    assert make.main(["--check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "config.md" in err and "jobs.md" not in err, err
    for field in ("replicas", "staleness_bound", "checkpoint_interval_s", "window", "average_every", "bad_input"):
        assert f"| `{field}` |" in (tmp_path / "config.md").read_text()  # every field has its row
