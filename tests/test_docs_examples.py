"""Every page's Python examples run as a script, as a user saves and runs them.

The ``python`` blocks of a page (README.md and docs/**.md), concatenated in page order, are one
script, run with ``python page.py`` in a folder that holds the repository's ``sample_traces/``
and ``tests/data/`` (the paths the pages use). A ``text`` block right after a ``python`` block
is what that block prints: the script's output must equal them all, in order. A block that
cannot run here says why in an HTML comment on the line above it,
``<!-- not run: the reason -->``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->\s*$")


def examples(page: Path) -> tuple[str, str, list[str]]:
    """(script, expected output, reasons of the blocks not run) of a page."""
    text = page.read_text(encoding="utf-8")
    script, output, not_run = [], [], []
    previous = None  # the kind of the block before, if nothing but blank lines lies between
    end = 0
    for fence in FENCE.finditer(text):
        kind, body = fence.group(1), fence.group(2)
        between = text[end : fence.start()]
        end = fence.end()
        adjacent = previous if between.strip() == "" else None
        previous = None
        if kind == "python":
            reason = NOT_RUN.search(between.rstrip("\n").rsplit("\n", 1)[-1])
            if reason:
                not_run.append(reason.group(1))
                continue
            script.append(body)
            previous = "python"
        elif kind == "text" and adjacent == "python":
            output.append(body)
    return "\n".join(script), "".join(output), not_run


def _pages_with_examples() -> list[Path]:
    return [p for p in PAGES if examples(p)[0].strip()]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A folder like the repository's root for the examples' relative paths; what they write
    lands here, not in the checkout."""
    folder = tmp_path_factory.mktemp("docs")
    (folder / "sample_traces").symlink_to(ROOT / "sample_traces")
    (folder / "tests").mkdir()
    (folder / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    return folder


@pytest.mark.parametrize("page", _pages_with_examples(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run_as_a_script_and_print_what_the_page_shows(page, workdir):
    script, expected, _ = examples(page)
    path = workdir / (page.stem + ".py")
    path.write_text(script, encoding="utf-8")
    env = {**os.environ, "COLUMNS": "100"}
    env.pop("HTA_LITE_START_METHOD", None)
    done = subprocess.run(
        [sys.executable, path.name], cwd=workdir, capture_output=True, text=True, env=env,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"{page.name} as a script:\n{done.stderr[-3000:]}"
    assert _lines(done.stdout) == _lines(expected)


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_blocks_not_run_say_why():
    """A page's examples are all run, or the ones that are not say why (and are few)."""
    not_run = {p.name: examples(p)[2] for p in PAGES if examples(p)[2]}
    allowed = {"collecting-traces.md", "operators.md", "memory-snapshots.md"}  # recording
    assert set(not_run) <= allowed, not_run


def test_the_extraction_sees_blocks_outputs_and_reasons(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n```python\nprint(1)\n```\n\n```text\n1\n```\nprose\n```text\nnot output\n```\n"
        "<!-- not run: needs a GPU -->\n```python\nimport torch\n```\n"
        "```python\nprint(2)\n```\n```text\n2\n```\n"
    )
    assert examples(page) == ("print(1)\n\nprint(2)\n", "1\n2\n", ["needs a GPU"])
