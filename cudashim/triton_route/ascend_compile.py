"""Does a launched Triton kernel compile for Ascend? The triton-ascend wheel's own frontend answers, no CANN.

Opt-in (CUDASHIM_TRITON_ASCEND_COMPILE=1 on the simulated NPU; or `check()` from code). For each kernel
specialization the simulated NPU launched, the kernel's source and the globals it names are written out as a
small module, and a CHILD interpreter that sees only the unpacked triton-ascend wheel (it installs as the
package `triton`, so it must never share a process with the installed Triton) compiles it through the wheel's
own stages: its code generator (Python AST → TTIR, with triton-ascend's language and refusals), its TTIR
passes, and its bundled `triton-adapter-opt` (TTIR → linalg, the last stage before CANN's bishengir-compile).
A failure is reported in the wheel's words (its MLIRCompilationError for the adapter stage). Results are
cached by the hash of what was compiled, the wheel and the mapping, so a kernel is compiled once per machine.

`triton.language.extra.libdevice`: triton-ascend 3.2.0's backend maps it onto nothing
(backends/ascend/compiler.py:800-801, `get_module_map` returns `{}`), so every CUDA-written kernel that
calls `libdevice.rsqrt` fails there. `libdevice_module()` builds the mapping the shim installs on a real NPU
(cudashim/triton_route/ascend.py) and this check uses by default: each libdevice name goes to
triton-ascend's `triton.language.extra.ascend.libdevice`, else to its `triton.language.math`.

The wheel and pybind11 (which the wheel's backend imports, utils.py:33, and does not declare) are pinned and
fetched into the wheel cache by scripts/install (`python -m cudashim.triton_route.ascend_compile --fetch`),
unpacked once under the cache; nothing is installed into the running environment.

Verification level: L2 for "compiles to linalg" (the wheel's frontend ran on the kernel); bishengir's
lowering, the Unified Buffer allocation and the NPU binary need CANN and are not checked here.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "WHEEL_SPEC", "PYBIND11_SPEC", "Spec", "Result", "describe", "check", "fetch", "frontend_dir",
    "libdevice_module", "surface", "NotCheckable", "SURFACE_PATH", "enabled",
]

WHEEL_SPEC = "triton-ascend==3.2.0"
PYBIND11_SPEC = "pybind11==3.1.0"
_WHEEL_GLOB = "triton_ascend-3.2.0-*.whl"
_PYBIND_GLOB = "pybind11-3.1.0-*.whl"
# what the child compiles for: the wheel's own default (NPUOptions) on an Atlas A2 training part
_TARGET_ARCH = "Ascend910B3"
_CHILD_TIMEOUT_S = 300
# a module the wheel does not have, spelled the way CUDA-written kernels import it -> the wheel's generic one
_MODULE_ALIASES = {
    "triton.language.extra.cuda.libdevice": "triton.language.extra.libdevice",
    "triton.language.extra.cuda": "triton.language.extra",
}
_LIBDEVICE = "triton.language.extra.libdevice"
#: triton-ascend's language names, read from the wheel (`--write-surface` regenerates it)
SURFACE_PATH = Path(__file__).resolve().with_name("ascend_surface.json")


def enabled() -> bool:
    """Whether the opt-in check is on (CUDASHIM_TRITON_ASCEND_COMPILE=1)."""
    from .. import envs

    return bool(envs.get("CUDASHIM_TRITON_ASCEND_COMPILE"))


class NotCheckable(Exception):
    """The kernel names a global the child cannot rebuild (a torch object, a closure): not checked, and why."""


@dataclass(frozen=True)
class Spec:
    """One kernel specialization, self-contained: the module source to compile and its argument kinds."""

    kernel: str  # "module:qualname", for people
    name: str  # the kernel's function name inside `source`
    source: str
    args: dict[str, Any]  # parameter -> {"ptr": dtype, "align16": bool} | {"int": v} | {"float": 0} | ...
    constants: dict[str, Any] = field(default_factory=dict)

    def key(self, map_libdevice: bool) -> str:
        blob = json.dumps([self.source, self.name, self.args, self.constants, map_libdevice, WHEEL_SPEC],
                          sort_keys=True, default=repr)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Result:
    compiles: bool
    stage: str  # "ttir" (the wheel's code generator and passes) or "ttadapter" (triton-adapter-opt) or ""
    message: str  # the wheel's own words when it failed

    def line(self) -> str:
        if self.compiles:
            return "yes"
        lines = [ln.strip() for ln in self.message.splitlines() if ln.strip() and "[ERROR][Triton]" not in ln
                 and not ln.strip().startswith("[INFO]")]
        # a code-generator error is "CompilationError: at L:C:", the source, then the cause on its last line
        why = lines[0] if len(lines) < 2 else f"{lines[0]} {lines[-1]}"
        return f"no ({self.stage}: {why[:300]})"


# ---- where the wheel lives -------------------------------------------------------------------------------

def _cache_root() -> Path:
    from ..emulated.npu.site import wheel_cache

    return wheel_cache()


def _find(glob: str) -> Path | None:
    root = _cache_root()
    found = sorted(root.glob(glob)) if root.is_dir() else []
    return found[0] if found else None


def fetch() -> tuple[Path | None, str]:
    """Download the pinned wheels (no dependency, nothing installed) into the wheel cache; (wheel, "") or
    (None, why)."""
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    for spec, glob in ((WHEEL_SPEC, _WHEEL_GLOB), (PYBIND11_SPEC, _PYBIND_GLOB)):
        if _find(glob) is not None:
            continue
        # the wheel is built for cp311 manylinux x86_64 only; naming the platform lets any host fetch it
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", spec,
               "-d", str(root), "--only-binary=:all:", "--platform", "manylinux_2_28_x86_64",
               "--python-version", "3.11", "--implementation", "cp"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if run.returncode != 0 or _find(glob) is None:
            return None, f"`pip download --no-deps {spec}` failed: {run.stderr.strip()[-400:]}"
    return _find(_WHEEL_GLOB), ""


def frontend_dir() -> Path:
    """The unpacked wheel (+ pybind11), a folder for a child's sys.path; unpacked on first use."""
    wheel, pybind = _find(_WHEEL_GLOB), _find(_PYBIND_GLOB)
    if wheel is None or pybind is None:
        from ..errors import CapabilityError

        raise CapabilityError(
            f"the Ascend compile check needs the {WHEEL_SPEC} and {PYBIND11_SPEC} wheels in {_cache_root()}; run "
            "`bash scripts/install` or `python -m cudashim.triton_route.ascend_compile --fetch` (set "
            "CUDASHIM_WHEEL_CACHE to use another folder), or leave CUDASHIM_TRITON_ASCEND_COMPILE unset")
    tag = hashlib.sha256(f"{wheel.name}:{wheel.stat().st_size}:{pybind.name}".encode()).hexdigest()[:12]
    out = _cache_root().parent / f"triton-ascend-frontend-{tag}"
    if (out / ".complete").exists():
        return out
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    for whl in (wheel, pybind):
        with zipfile.ZipFile(whl) as z:
            for info in z.infolist():
                z.extract(info, tmp)
                mode = (info.external_attr >> 16) & 0o777
                if mode & 0o111:  # triton-adapter-opt: zip keeps the executable bit only in its attributes
                    os.chmod(tmp / info.filename, mode)
    (tmp / ".complete").write_text(wheel.name)
    try:
        tmp.rename(out)
    except OSError:  # another process unpacked it first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _results_dir() -> Path:
    d = _cache_root().parent / "triton-ascend-compile"
    d.mkdir(parents=True, exist_ok=True)
    return d


# ---- describing a launch (parent, installed Triton) --------------------------------------------------------

_TORCH_DTYPES = {  # torch dtype name -> Triton's type name (the table of the wheel's runtime/jit.py:436-457)
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
    "uint32": "u32", "uint64": "u64", "float16": "fp16", "bfloat16": "bf16", "float32": "fp32",
    "float64": "fp64", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float8_e4m3fnuz": "fp8e4b8",
    "float8_e5m2fnuz": "fp8e5b16",
}


def _constant(value: Any, where: str) -> Any:
    import triton.language as tl

    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, tl.dtype):
        return {"dtype": value.name}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [_constant(v, where) for v in value]
    raise NotCheckable(f"{where} is a {type(value).__name__}")


def _names(src: str) -> list[str]:
    tree = ast.parse(src)
    fn = tree.body[0]
    local = {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}
    local |= {t.id for t in ast.walk(fn) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
    seen = [n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    return [n for n in dict.fromkeys(seen) if n not in local]


class _Writer:
    """Writes one module holding a kernel, the @jit functions it calls and the globals they name."""

    def __init__(self) -> None:
        self.head: list[str] = ["import triton", "import triton.language"]
        self.body: list[str] = []
        self.done: dict[int, str] = {}

    def function(self, jf: Any) -> str:
        if id(jf) in self.done:
            return self.done[id(jf)]
        name = jf.fn.__name__
        self.done[id(jf)] = name
        scope = jf.get_capture_scope()
        for g in _names(jf.src):
            if g in scope:
                self.value(g, scope[g], f"global {g!r} of {jf.fn.__module__}:{jf.fn.__qualname__}")
        self.body.append(f"@triton.jit\n{jf.src}")
        return name

    def value(self, alias: str, value: Any, where: str) -> None:
        import types

        from triton.runtime.jit import JITFunction

        if isinstance(value, types.ModuleType):
            mod = _MODULE_ALIASES.get(value.__name__, value.__name__)
            if not (mod.startswith("triton") or mod in sys.stdlib_module_names):
                raise NotCheckable(f"{where} is the module {value.__name__}")
            self.head.append(f"import {mod} as {alias}" if "." in mod or mod != alias else f"import {mod}")
        elif isinstance(value, JITFunction):
            real = self.function(value)
            if real != alias:
                self.body.append(f"{alias} = {real}")
        elif (callable(value) and getattr(value, "__module__", "").startswith("triton.language")
              and hasattr(value, "__name__")):
            mod = _MODULE_ALIASES.get(value.__module__, value.__module__)
            self.head.append(f"from {mod} import {value.__name__} as {alias}")
        elif hasattr(value, "fn") and hasattr(value, "configs"):  # an Autotuner/Heuristics wrapping a @jit
            self.value(alias, value.fn, where)
        else:
            import triton.language as tl

            const = _constant(value, where)
            if isinstance(value, tl.constexpr):
                self.head.append(f"{alias} = triton.language.constexpr({_literal(const)})")
            else:
                self.head.append(f"{alias} = {_literal(const)}")

    def source(self) -> str:
        return "\n".join(dict.fromkeys(self.head)) + "\n\n\n" + "\n\n".join(self.body) + "\n"


def _literal(const: Any) -> str:
    if isinstance(const, dict) and "dtype" in const:
        return f"triton.language.dtype({const['dtype']!r})"
    if isinstance(const, list):
        return "(" + "".join(_literal(c) + ", " for c in const) + ")"
    return repr(const)


def _arg(value: Any, where: str) -> dict[str, Any]:
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        dt = str(value.dtype).removeprefix("torch.")
        if dt not in _TORCH_DTYPES:
            raise NotCheckable(f"{where} has dtype {dt}")
        return {"ptr": _TORCH_DTYPES[dt], "align16": value.data_ptr() % 16 == 0}
    if value is None:
        return {"none": True}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": value}
    raise NotCheckable(f"{where} is a {type(value).__name__}")


def describe(kernel: Any, bound_args: dict[str, Any]) -> Spec:
    """The specialization `kernel` (a JITFunction of the installed Triton) gets with these bound arguments;
    raises NotCheckable saying what cannot be rebuilt in the child."""
    w = _Writer()
    name = w.function(kernel)
    args: dict[str, Any] = {}
    constants: dict[str, Any] = {}
    for p in kernel.params:
        if p.name not in bound_args:
            continue
        v = bound_args[p.name]
        if p.is_constexpr:
            constants[p.name] = _constant(v, f"argument {p.name}")
        else:
            args[p.name] = _arg(v, f"argument {p.name}")
    qual = f"{kernel.fn.__module__}:{kernel.fn.__qualname__}"
    return Spec(qual, name, w.source(), args, constants)


# ---- checking (parent) -------------------------------------------------------------------------------------

def check(specs: list[Spec], *, map_libdevice: bool = True) -> list[Result]:
    """Compile each spec through the wheel's frontend (cached); one child process for all that are not cached."""
    results: dict[int, Result] = {}
    todo: list[tuple[int, Spec]] = []
    for i, s in enumerate(specs):
        f = _results_dir() / f"{s.key(map_libdevice)}.json"
        if f.exists():
            results[i] = Result(**json.loads(f.read_text()))
        else:
            todo.append((i, s))
    if todo:
        request = {"map_libdevice": map_libdevice, "arch": _TARGET_ARCH,
                   "specs": [{"name": s.name, "source": s.source, "args": s.args, "constants": s.constants,
                              "kernel": s.kernel} for _, s in todo]}
        for (i, s), r in zip(todo, _run_child(request)):
            results[i] = r
            (_results_dir() / f"{s.key(map_libdevice)}.json").write_text(json.dumps(r.__dict__))
    return [results[i] for i in range(len(specs))]


def _child_command() -> list[str]:
    # -S -E -s: no site-packages (the installed triton and torch stay out), no PYTHON* settings (the shim's
    # bootstrap stays out); this file runs as a script so no package of ours is imported there
    return [sys.executable, "-S", "-E", "-s", str(Path(__file__).resolve()), "--child", str(frontend_dir())]


def _run_child(request: dict[str, Any]) -> list[Result]:
    run = subprocess.run(_child_command(), input=json.dumps(request), capture_output=True, text=True,
                         timeout=_CHILD_TIMEOUT_S, cwd=tempfile.gettempdir())
    try:
        answers = json.loads(run.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        from ..errors import CudashimError

        raise CudashimError(f"the triton-ascend frontend child failed (exit {run.returncode}): "
                            f"{run.stderr.strip()[-1500:]}") from None
    return [Result(**a) for a in answers]


def surface() -> dict[str, Any]:
    """triton-ascend's language names, read from the wheel by a child: what ascend_surface.json holds."""
    run = subprocess.run(_child_command()[:-2] + ["--surface", str(frontend_dir())], capture_output=True,
                         text=True, timeout=_CHILD_TIMEOUT_S, cwd=tempfile.gettempdir())
    if run.returncode != 0:
        from ..errors import CudashimError

        raise CudashimError(f"reading triton-ascend's language surface failed: {run.stderr.strip()[-1500:]}")
    return json.loads(run.stdout)


# ---- the mapping (runs where triton IS triton-ascend: the child, or a real NPU host) -----------------------

def libdevice_module(triton: Any) -> Any:
    """A module standing for `triton.language.extra.libdevice` under triton-ascend: each name from
    triton.language.extra.ascend.libdevice, else triton.language.math; others raise a clear AttributeError."""
    import importlib
    import types

    ascend_lib = importlib.import_module("triton.language.extra.ascend.libdevice")
    math = triton.language.math
    generic = importlib.import_module(_LIBDEVICE)
    mod = types.ModuleType(_LIBDEVICE, "triton.language.extra.libdevice mapped onto triton-ascend's functions")
    for n in dir(generic):
        if n.startswith("_"):
            continue
        f = getattr(ascend_lib, n, None) or getattr(math, n, None)
        if callable(f):
            setattr(mod, n, f)

    def __getattr__(name: str) -> Any:
        raise AttributeError(
            f"triton.language.extra.libdevice.{name} has no Ascend implementation: triton-ascend has it neither "
            "in triton.language.extra.ascend.libdevice nor in triton.language.math; write it with tl.* operations")

    mod.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return mod


def _mapped_names(triton: Any) -> list[str]:
    return sorted(n for n in dir(libdevice_module(triton)) if not n.startswith("_"))


# ---- the child -----------------------------------------------------------------------------------------------

def _child_compile(triton: Any, req: dict[str, Any], spec: dict[str, Any], workdir: Path, n: int) -> dict[str, Any]:
    import importlib.util

    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend
    from triton.compiler.errors import MLIRCompilationError
    from triton._C.libtriton import ir

    path = workdir / f"cudashim_kernel_{n}.py"
    path.write_text(spec["source"])
    try:
        loader = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        fn = getattr(module, spec["name"])
    except Exception as exc:  # the wheel's Triton cannot even define it (a name 3.2 does not have)
        return {"compiles": False, "stage": "ttir", "message": f"{type(exc).__name__}: {exc}"}

    class _Ptr:  # what AttrsDescriptor asks of a tensor: its address's alignment
        def __init__(self, aligned: bool) -> None:
            self.aligned = aligned

        def data_ptr(self) -> int:
            return 0 if self.aligned else 8

    signature: dict[str, str] = {}
    values: list[Any] = []
    constants: dict[str, Any] = {}
    from triton.runtime.jit import mangle_type

    def const(v: Any) -> Any:
        if isinstance(v, dict) and "dtype" in v:
            return triton.language.dtype(v["dtype"])
        if isinstance(v, list):
            return tuple(const(x) for x in v)
        return v

    for p in fn.params:
        if p.name in spec["constants"]:
            values.append(const(spec["constants"][p.name]))
            constants[p.name] = values[-1]
            continue
        a = spec["args"].get(p.name, {"none": True})
        if "ptr" in a:
            signature[p.name], v = "*" + a["ptr"], _Ptr(a["align16"])
        elif "none" in a:
            signature[p.name], v = "*i8", None
            constants[p.name] = None
        else:
            v = next(iter(a.values()))
            signature[p.name] = mangle_type(v)
        values.append(v)
    target = GPUTarget("npu", req["arch"], 0)
    backend = make_backend(target)
    attrs = backend.get_attrs_descriptor(fn.params, values)
    # as the wheel's JITFunction.run does (runtime/jit.py:640-646): ints equal to 1 become constants
    for p, v in zip(fn.params, values):
        if p.num in attrs.get_constants():
            constants[p.name] = v
    src = ASTSource(fn, signature, constants, attrs)
    options = backend.parse_options({})
    module_map = dict(backend.get_module_map())
    if req["map_libdevice"]:
        module_map[_LIBDEVICE] = libdevice_module(triton)
    ctx = ir.context()
    ir.load_dialects(ctx)
    backend.load_dialects(ctx)
    try:
        mod = src.make_ir(options, backend.get_codegen_implementation(), module_map, ctx)
    except Exception as exc:  # the code generator's refusal (a CompilationError with the kernel's line)
        return {"compiles": False, "stage": "ttir", "message": f"{type(exc).__name__}: {exc}"}
    stages: dict[str, Any] = {}
    backend.add_stages(stages, options)
    metadata = {"hash": "cudashim-check", "target": target, **options.__dict__}
    for stage in ("ttir", "ttadapter"):
        try:
            mod = stages[stage](mod, metadata)
        except Exception as exc:
            # the wheel's own wrapping of a stage failure (compiler/compiler.py:306-318)
            detail = exc.stderr.decode("utf-8") if getattr(exc, "stderr", None) else str(exc)
            name = "ConvertTritonIRToLinalgIR" if stage == "ttadapter" else "MLIRCompile"
            return {"compiles": False, "stage": stage, "message": str(MLIRCompilationError(name, detail))}
    return {"compiles": True, "stage": "", "message": ""}


def _child(argv: list[str]) -> int:
    mode, where = argv[0], argv[1]
    sys.path.insert(0, where)
    import triton  # the wheel's: nothing else named triton is on this interpreter's path

    if mode == "--surface":
        import importlib

        import types

        def functions(mod: Any) -> list[str]:
            return sorted(n for n, v in vars(mod).items()
                          if not n.startswith("_") and callable(v) and not isinstance(v, (type, types.ModuleType))
                          and str(getattr(v, "__module__", "")).startswith("triton"))

        ascend_lib = importlib.import_module("triton.language.extra.ascend.libdevice")
        print(json.dumps({
            "triton_ascend": triton.__version__,
            "wheel": WHEEL_SPEC,
            "libdevice_mapped": _mapped_names(triton),
            "math": functions(triton.language.math),
            "ascend_libdevice": functions(ascend_lib),
        }, indent=1, sort_keys=True))
        return 0
    req = json.loads(sys.stdin.read())
    out = []
    with tempfile.TemporaryDirectory(prefix="cudashim-ascend-") as d:
        sys.path.insert(0, d)
        for n, spec in enumerate(req["specs"]):
            out.append(_child_compile(triton, req, spec, Path(d), n))
    sys.stdout.write("\n" + json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("--child", "--surface"):
        sys.exit(_child(sys.argv[1:]))
    if len(sys.argv) > 1 and sys.argv[1] == "--write-surface":
        # ascend_surface.json, from the wheel (a test checks it is current where the wheel is cached)
        SURFACE_PATH.write_text(json.dumps(surface(), indent=1, sort_keys=True) + "\n")
        print(SURFACE_PATH)
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "--fetch":
        wheel, why = fetch()
        if wheel is None:
            sys.stderr.write(f"cudashim: the Ascend compile check will not run: {why}\n")
            sys.exit(1)
        print(wheel)
        sys.exit(0)
    sys.stderr.write("usage: python -m cudashim.triton_route.ascend_compile --fetch | --write-surface\n")
    sys.exit(2)
