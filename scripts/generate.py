"""Every derived text of the repository, rendered from its one source, and the seams no import sees, checked.

    python scripts/generate.py --write    # rewrite every generated text
    python scripts/generate.py --check    # exit 1 naming each stale text and each broken seam (a test runs it)

Generated (each between `<!-- NAME:begin -->`-style markers; the text between them is never edited by hand):
  - README.md's capability table, from cudashim/platform/capabilities.py;
  - the results blocks (`<!-- results:NAME -->`) of README.md and docs/*.md, from benchmarks/results/NAME.json
    (scripts/docs.py renders one);
  - docs/environment.md's reference, from cudashim/envs.py (READ and PLATFORM_ENV);
  - docs/contributing.md's layer chain, from pyproject's import-linter layers contract;
  - docs/contributing.md's tree, from the files themselves (a module's docstring, a source's first comment,
    a test folder's line in tests/conftest.py's FOLDERS), and its test-tier map, from pyproject's markers and
    tests/conftest.py's folder tiers.
Checked:
  - every module the package looks up by name in sys.modules (or imports by a string) exists;
  - every file of csrc/ is in the native build (cudashim/emulated/_build.py's native_files: compiled or
    hashed into the cache key);
  - every results block quotes a results file that exists;
  - every `docs/design.md §N` cited names a section of the design document.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
COMMAND = "python scripts/generate.py --write"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _package(root: Path) -> None:
    """The checkout's package first on the path: the generated texts describe this tree, not an install."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))


# ----------------------------------------------------------------------------------------------------
# Blocks: a document's text between two markers, rendered from a source.


def _block(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin (generated: {COMMAND}) -->", f"<!-- {name}:end -->"


def _replace(text: str, begin: str, end: str, body: str, where: str) -> str:
    try:
        head, rest = text.split(begin, 1)
        _old, tail = rest.split(end, 1)
    except ValueError:
        raise SystemExit(f"{where}: the markers {begin} and {end} are missing; add them where the text goes") from None
    return f"{head}{begin}\n{body.rstrip()}\n{end}{tail}"


def _first_sentence(text: str, limit: int = 100) -> str:
    """The first sentence of a paragraph: up to a full stop, or a colon that ends a clause of some length,
    outside parentheses; cut at a word near `limit`."""
    para = " ".join(text.strip().split("\n\n")[0].split())
    para = re.sub(r"\s*\((docs/)?design\.md §[\d\-–, §]+\)", "", para)
    depth, end = 0, len(para)
    for i, ch in enumerate(para):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        nxt = para[i + 1: i + 2]
        if depth == 0 and nxt in ("", " ") and (ch == "." or (ch in ":;" and i >= 30)):
            end = i
            break
    line = para[:end]
    if len(line) > limit:
        line = line[: limit - 1].rsplit(" ", 1)[0] + "…"
    return line


def describe(path: Path) -> str | None:
    """One line for the tree, read from the file itself (None: the file says nothing of itself)."""
    if path.is_dir():
        for inner in (path / "__init__.py", path / "README.md"):
            if inner.is_file():
                return describe(inner)
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        if path.name == "__main__.py":
            return f"`python -m {path.parent.name}`"
        try:
            doc = ast.get_docstring(ast.parse(text))
        except SyntaxError:
            doc = None
        if not doc:
            comments = []
            for ln in text.splitlines():
                if not ln.startswith("#") or ln.startswith("#!"):
                    break
                comments.append(ln.lstrip("# ").strip())
            doc = "\n".join(comments)
        return _first_sentence(doc) if doc else None
    if path.suffix in (".cpp", ".h"):
        lines = [ln[2:].strip() for ln in text.splitlines() if ln.startswith("//")]
        return _first_sentence(" ".join(lines[:3])) if lines else None
    if path.suffix == ".md":
        heads = [ln.lstrip("# ").strip() for ln in text.splitlines() if ln.startswith("#")]
        return heads[0] if heads else None
    if path.suffix in (".toml", ".json", ".txt"):
        return None
    lines = text.splitlines()
    comments = [ln.lstrip("# ").strip() for ln in lines[1:6] if ln.startswith("#") and not ln.startswith("#!")]
    return _first_sentence(" ".join(comments[:2])) if lines and lines[0].startswith("#!") and comments else None


def _conftest_literals(root: Path) -> dict[str, object]:
    tree = ast.parse((root / "tests" / "conftest.py").read_text(encoding="utf-8"))
    out: dict[str, object] = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and node.value is not None:
            try:
                out[target.id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


# folders at the top of the tree, in the order the map shows them, with the depth it lists: 0 the folder
# alone, 1 its entries, -1 every file under it (csrc/, where each file is a unit of the build)
_TOP: dict[str, tuple[int, str | None]] = {
    "cudashim": (1, None),
    "csrc": (-1, "the emulated device's native core, compiled on the user's machine (shipped as cudashim/_csrc/)"),
    "tests": (1, None),
    "examples": (1, "CUDA-written programs, run unchanged"),
    "benchmarks": (1, "python benchmarks/run.py [name…]; results/ holds every figure (JSON), quoted by the docs"),
    "verification": (1, "harnesses that check the device against an oracle: sweeps, oracle runs, traces"),
    "scripts": (1, "install, test, generate (every generated text), wheel_check, the NPU tables' makers"),
    "docs": (1, "for readers"),
}
_FILES_AT_TOP = {"pyproject.toml": "the package, its pins, the test tiers and the import rules ([tool.importlinter])",
                 "setup.py": None, "sitecustomize.py": None}
# folders that are not packages and hold no README: their line is here
_FOLDER_LINES = {"tests": "by subject; one root conftest.py (tiers, FOLDERS); helpers in fixtures/",
                 "examples/nano_vllm": "nano-vllm, unmodified, with its checkpoint builder and reference run"}
_SKIP = {"__pycache__", "_csrc", "results"}
_WIDTH = 30


def _kept(root: Path) -> set[str] | None:
    """In a git checkout, the paths (files and every folder above them) git tracks or would add: what is
    ignored (build outputs, caches, a local venv) is not part of the map. None outside a checkout."""
    if not (root / ".git").exists():
        return None
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    kept: set[str] = set()
    for line in out.splitlines():
        parts = line.split("/")
        kept.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return kept


def _shown(root: Path, path: Path, kept: set[str] | None) -> bool:
    return (kept is None or path.relative_to(root).as_posix() in kept) and path.name not in _SKIP \
        and not path.name.startswith(".")


def _entries(root: Path, folder: Path, kept: set[str] | None) -> list[Path]:
    return sorted((p for p in folder.iterdir() if _shown(root, p, kept)), key=lambda p: (p.is_dir(), p.name.lower()))


def render_tree(root: Path, problems: list[str] | None = None) -> str:
    problems = [] if problems is None else problems
    folders = _conftest_literals(root).get("FOLDERS") or {}
    assert isinstance(folders, dict)
    kept = _kept(root)
    lines: list[str] = ["```"]

    def row(indent: int, name: str, what: str | None, path: Path) -> None:
        what = _FOLDER_LINES.get(path.relative_to(root).as_posix(), what)
        if what is None:
            problems.append(f"{path.relative_to(root)}: says nothing of itself (a docstring, a first comment) for "
                            "docs/contributing.md's tree")
            what = "?"
        label = "  " * indent + name
        lines.append((f"{label:<{_WIDTH}} {what}" if len(label) < _WIDTH else f"{label} {what}").rstrip())

    for name, fixed in _FILES_AT_TOP.items():
        if (root / name).is_file():
            row(0, name, fixed or describe(root / name), root / name)
    tops = sorted(p.name for p in root.iterdir() if p.is_dir() and _shown(root, p, kept)
                  and (kept is not None or (p.name != "build" and not p.name.endswith(".egg-info"))))
    for extra in (t for t in tops if t not in _TOP):
        problems.append(f"{extra}/: a top-level folder docs/contributing.md's tree does not know (scripts/generate.py _TOP)")
    for top, (depth, fixed) in _TOP.items():
        folder = root / top
        if not folder.is_dir():
            continue
        row(0, f"{top}/", fixed or describe(folder), folder)
        if depth == 1:
            for p in _entries(root, folder, kept):
                if top == "tests":
                    if p.is_dir():
                        row(1, f"{p.name}/", folders.get(p.name), p)
                    continue
                if p.suffix in (".json", ".toml", ".txt") and top != "cudashim":
                    continue
                row(1, p.name + ("/" if p.is_dir() else ""), describe(p), p)
        elif depth == -1:
            for p in sorted(q for q in folder.rglob("*") if _shown(root, q, kept)):
                if p.is_file() and not set(p.relative_to(folder).parts) & _SKIP:
                    rel = p.relative_to(folder)
                    row(len(rel.parts), rel.name, describe(p), p)
                elif p.is_dir():
                    rel = p.relative_to(folder)
                    row(len(rel.parts), rel.name + "/", "", p)
    lines.append("```")
    return "\n".join(lines)


def render_tiers(root: Path) -> str:
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    markers = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    tiers = _conftest_literals(root).get("_FOLDER_TIERS") or {}
    assert isinstance(tiers, dict)
    lines = ["| marker | what it means | folders whose every test carries it | run only it |", "|---|---|---|---|"]
    for m in markers:
        name, _, what = m.partition(":")
        carried = ", ".join(f"tests/{f}" for f, t in sorted(tiers.items()) if t == name.strip()) or "(marked per test)"
        lines.append(f"| `{name.strip()}` | {what.strip()} | {carried} | `python -m pytest -m {name.strip()}` |")
    unknown = sorted(set(tiers.values()) - {m.partition(":")[0].strip() for m in markers})
    if unknown:
        lines.append(f"\nUnknown tiers in tests/conftest.py (not in pyproject's markers): {unknown}")
    return "\n".join(lines)


def render_layers(root: Path) -> str:
    """pyproject's layers contract, as the chain docs/contributing.md shows."""
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    short = [" | ".join(f"`{m.strip().removeprefix('cudashim.')}`" for m in layer.split("|")) for layer in layers]
    return " →\n".join(short) + "."


def _value(v: object) -> str:
    if v is None:
        return "unset"
    if v is True or v is False:
        return "1" if v else "0"
    if isinstance(v, tuple):
        return ", ".join(map(str, v)) or "empty"
    return f"`{v}`"


def render_environment(root: Path) -> str:
    _package(REPO)
    from cudashim import envs

    lines = ["### Read", "", "| variable | when unset | meaning |", "|---|---|---|"]
    for name, (_parse, default, doc) in envs._READ_ROWS.items():
        cell = doc.replace("|", "\\|")
        lines.append(f"| `{name}` | {_value(default)} | {cell} |")
    lines += ["", "### Set by the bootstrap, per platform, before torch is imported", "",
              "`default`: set only when absent (a value of yours wins); `owned`: the shim needs this value and "
              "sets it over yours, saying so once.", "",
              "| platform | variable | value | mode | why |", "|---|---|---|---|---|"]
    for rule in envs.PLATFORM_ENV:
        why = rule.why + (f" (from `{rule.source}` when that is set)" if rule.source else "") \
            + (f" (only when: {rule.when.replace('_', ' ')})" if rule.when else "")
        lines.append(f"| {rule.platform} | `{rule.name}` | {_value(rule.value)} | {rule.mode} | {why} |")
    return "\n".join(lines)


def render_capabilities(root: Path) -> str:
    _package(REPO)
    from cudashim.platform import capabilities

    return capabilities.render_markdown()


# (document, marker name, renderer): the blocks this command owns besides the results blocks
def _blocks() -> list[tuple[str, tuple[str, str], Callable[[Path], str]]]:
    _package(REPO)
    from cudashim.platform import capabilities

    return [
        ("README.md", (capabilities._BEGIN, capabilities._END), render_capabilities),
        ("docs/environment.md", _block("environment"), render_environment),
        ("docs/contributing.md", _block("tree"), render_tree),
        ("docs/contributing.md", _block("tiers"), render_tiers),
        ("docs/contributing.md", _block("layers"), render_layers),
    ]


def _results(root: Path) -> ModuleType:
    docs = _load("_generate_docs", REPO / "scripts" / "docs.py")
    docs.RESULTS = root / "benchmarks" / "results"
    docs.REPO = root
    return docs


def render(root: Path = REPO) -> dict[Path, str]:
    """Every document this command owns, as it should read: {path: text}."""
    out: dict[Path, str] = {}
    docs = _results(root)
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        out[path] = docs.refresh(path.read_text(encoding="utf-8"))
    for rel, (begin, end), fn in _blocks():
        path = root / rel
        text = out.get(path)
        if text is None:
            text = path.read_text(encoding="utf-8") if path.is_file() else ""
        out[path] = _replace(text, begin, end, fn(root), rel)
    return out


# ----------------------------------------------------------------------------------------------------
# Seams: names written as strings, which neither an import nor lint-imports follows.


def _is_sys_modules(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "modules" and isinstance(node.value, ast.Name) \
        and node.value.id in ("sys", "_sys")


def _looked_up(tree: ast.AST) -> list[tuple[int, str]]:
    """("cudashim…" names, line) looked up in sys.modules or imported by a string in one module."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        args: list[ast.AST] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if _is_sys_modules(f.value) and f.attr in ("get", "pop", "setdefault", "__contains__"):
                args = node.args[:1]
            elif f.attr == "import_module" or (isinstance(f.value, ast.Name) and f.attr == "find_spec"):
                args = node.args[:1]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"):
            args = node.args[:1]
        elif isinstance(node, ast.Subscript) and _is_sys_modules(node.value):
            args = [node.slice]
        elif isinstance(node, ast.Compare) and any(_is_sys_modules(c) for c in node.comparators):
            args = [node.left]
        for a in args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.split(".")[0] == "cudashim":
                found.append((a.lineno, a.value))
    return found


def _module_exists(root: Path, name: str) -> bool:
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def check_module_names(root: Path) -> list[str]:
    problems = []
    for path in sorted((root / "cudashim").rglob("*.py")):
        if "_csrc" in path.parts:
            continue
        for line, name in _looked_up(ast.parse(path.read_text(encoding="utf-8"))):
            if not _module_exists(root, name):
                problems.append(f"{path.relative_to(root)}:{line}: looks up the module {name!r}, which does not exist")
    return problems


def check_native_sources(root: Path) -> list[str]:
    _package(REPO)
    from cudashim.emulated._build import native_files

    csrc = root / "csrc"
    sources, headers = native_files(csrc)
    built = set(sources) | set(headers)
    on_disk = {p.relative_to(csrc).as_posix() for p in csrc.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    return [f"csrc/{f}: not part of the native build (neither compiled nor in the cache key); name it .cpp or .h, "
            "or move it out of csrc/" for f in sorted(on_disk - built)] + \
           [f"csrc/{f}: in the native build but not in csrc/" for f in sorted(built - on_disk)]


def check_results_quoted(root: Path) -> list[str]:
    """A results block quotes a file that exists: a block without its data is a promise nobody kept."""
    docs = _results(root)
    return [f"{doc.relative_to(root)}: block results:{m.group('name')} quotes benchmarks/results/{m.group('name')}.json, "
            "which does not exist; run its benchmark, or remove the block"
            for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
            for m in docs.BLOCK.finditer(doc.read_text(encoding="utf-8"))
            if not (root / "benchmarks" / "results" / f"{m.group('name')}.json").is_file()]


_CITATION = re.compile(r"docs/design\.md (§\d+)(?:-§(\d+))?")


def check_design_citations(root: Path) -> list[str]:
    """Every `docs/design.md §N` names a section the design document has."""
    design = root / "docs" / "design.md"
    sections = set(re.findall(r"^## (§\d+)", design.read_text(encoding="utf-8"), re.M)) if design.is_file() else set()
    problems = []
    for path in sorted(p for top in ("cudashim", "csrc", "docs", "scripts", "tests", "benchmarks", "verification")
                       for p in (root / top).rglob("*") if p.suffix in (".py", ".md", ".cpp", ".h", ".toml")):
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in _CITATION.finditer(line):
                cited = [m.group(1)] + ([f"§{m.group(2)}"] if m.group(2) else [])
                problems += [f"{path.relative_to(root)}:{n}: cites docs/design.md {c}, which it does not have"
                             for c in cited if c not in sections]
    return problems


def check(root: Path = REPO) -> list[str]:
    """Everything stale or broken, one line each (empty: all current)."""
    problems: list[str] = check_results_quoted(root)
    for path, text in render(root).items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            problems.append(f"{path.relative_to(root)}: stale; run `{COMMAND}`")
    tree_problems: list[str] = []
    render_tree(root, tree_problems)
    return (problems + tree_problems + check_module_names(root) + check_native_sources(root)
            + check_design_citations(root))


def write(root: Path = REPO) -> list[Path]:
    changed = []
    for path, text in render(root).items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="rewrite every generated text")
    g.add_argument("--check", action="store_true", help="exit 1 naming each stale text and broken seam")
    args = ap.parse_args(argv)
    if args.write:
        for path in write():
            print(f"rewrote {path.relative_to(REPO)}")
    problems = check()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
