"""The shape of the package (docs/architecture.md): imports run one way through the layers, modules
stay small, and every public method says what it returns."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import hta_lite
from hta_lite import TraceAnalysis, TraceDiff

PACKAGE = Path(hta_lite.__file__).parent
# lowest first: a module may import from its own layer and the ones before it, never after
LAYERS = [
    # vocabulary, shared math, units, validated settings, safe writes and printing
    (
        "kineto",
        "collective_names",
        "errors",
        "missing_data",
        "intervals",
        "rows",
        "classify",
        "units",
        "settings",
        "safe_output",
    ),  # fmt: skip
    ("load",),  # files -> typed tables
    ("analyses",),  # tables -> DataFrames
    ("plots",),  # DataFrames -> figures
    ("tools",),  # writers, batch, synthetic traces
    ("facade",),  # TraceAnalysis, TraceDiff
    ("views",),  # CLI, HTML report
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}
TOP = len(LAYERS)  # hta_lite/__init__.py and __main__.py see everything


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    return TOP if len(parts) == 1 or parts[1] == "__main__" else LAYER_OF[parts[1]]


def imported(path: Path) -> set[str]:
    """hta_lite modules imported by a file, anywhere in it (function-level imports too)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # "from . import x": x may be a module
                full = f"{target}.{alias.name}"
                is_module = (PACKAGE.parent / (full.replace(".", "/") + ".py")).exists()
                out.add(full if is_module else target)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m == "hta_lite" or m.startswith("hta_lite.")}


FILES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_one_way(path):
    mine = layer(module_name(path))
    upward = [m for m in imported(path) if m != "hta_lite" and layer(m) > mine]
    assert not upward, f"{module_name(path)} (layer {mine}) imports from above: {upward}"


#: modules that read, decode or cache files: the readers' side of the seam (docs/architecture.md)
READING = ("hta_lite.load.loader", "hta_lite.load.readers", "hta_lite.load.decode",
           "hta_lite.load.stream", "hta_lite.load.gzip_text", "hta_lite.load.cache",
           "hta_lite.load.tables", "hta_lite.load.second_pass", "hta_lite.load.workers",
           "hta_lite.load.plain_pickle", "hta_lite.load.repair")  # fmt: skip
ANALYSES = [p for p in FILES if module_name(p).startswith("hta_lite.analyses")]
WRITES_HEALTH = re.compile(
    r"\btrace\w*\.health(\[[^\]]*\]\s*[-+]?=(?!=)|\.(update|setdefault|pop|clear)\(|\s*=(?!=))"
    r"|\b(record|note)\(\s*[\w.]*\.health\b"
)


@pytest.mark.parametrize("path", ANALYSES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_analyses_neither_read_files_nor_write_health(path):
    """Analyses read the tables of the contract and return their problems with their result
    (the facade records them): they never read a file nor write into a trace's health."""
    reading = [m for m in imported(path) if m.startswith(READING)]
    assert not reading, f"{module_name(path)} imports a module that reads files: {reading}"
    text = path.read_text()
    assert not WRITES_HEALTH.search(text), f"{module_name(path)} writes into a trace's health"


def test_the_health_rule_can_fail():
    assert WRITES_HEALTH.search('record(trace.health, "x", 1)')
    assert WRITES_HEALTH.search('trace.health["x"] = 1')
    assert WRITES_HEALTH.search("trace.health.update(found)")
    assert not WRITES_HEALTH.search('trace.health.get("x", 0)')
    assert not WRITES_HEALTH.search("counted = {**trace.health, **found}")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path):
    assert len(path.read_text().splitlines()) <= 400, "split it by responsibility"


def public_methods():
    for cls in (TraceAnalysis, TraceDiff):
        for name, member in inspect.getmembers(cls):
            if not name.startswith("_") and (callable(member) or isinstance(member, property)):
                yield f"{cls.__name__}.{name}", member


METHODS = dict(public_methods())


@pytest.mark.parametrize("name", sorted(METHODS))
def test_public_methods_document_what_they_return(name):
    """help() in a notebook is the documentation most users read: every public method says
    what it gives back (Returns, or a first line naming the result) and, when it takes
    options, what they mean (Args)."""
    member = METHODS[name]
    doc = inspect.getdoc(member.fget if isinstance(member, property) else member) or ""
    assert len(doc) > 40, f"{name}: no docstring"
    if isinstance(member, property):
        return
    params = [p for p in inspect.signature(member).parameters if p not in ("self", "cls")]
    long_form = "Returns:" in doc or "Returns" in doc.split("\n\n")[0] or len(params) <= 1
    assert long_form, f"{name}: say what it returns (a Returns: section)"
    if len(params) > 2:
        assert "Args:" in doc or all(p in doc for p in params), f"{name}: document its options"


#: Kineto words an analysis must take from hta_lite/kineto.py, not spell (``"kernel"`` and
#: ``"user_annotation"`` are also column names and source labels, so not listed)
KINETO_LITERALS = re.compile(
    r"\"(ProfilerStep#|aten::|gpu_memcpy|gpu_memset|cuda_runtime|cuda_driver|cpu_op"
    r"|python_function|gloo|cuda_sync|gpu_user_annotation)\""
)


@pytest.mark.parametrize("path", ANALYSES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_analyses_take_kineto_words_from_one_place(path):
    found = KINETO_LITERALS.findall(path.read_text())
    assert not found, f"{module_name(path)} spells {found}: use the names in hta_lite/kineto.py"


#: text decoders: an analysis asks hta_lite.load.inputs for a decoded input text
DECODERS = {"json", "msgspec", "orjson", "ast"}


def third_party_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("path", ANALYSES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_analyses_decode_no_text(path):
    """A trace's JSON texts (input shapes, types, concrete inputs, group ranks) are decoded in
    one place of the load layer (hta_lite/load/inputs.py), never re-derived by an analysis."""
    found = third_party_imports(path) & DECODERS
    assert not found, f"{module_name(path)} imports {found}: use hta_lite.load.inputs"


def test_the_decoder_rule_can_fail():
    assert "json" in third_party_imports(PACKAGE / "load" / "inputs.py") & DECODERS
