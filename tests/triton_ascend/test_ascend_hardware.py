"""Triton on a real NPU host (triton_route/ascend_hardware.py, which the npu installer runs once triton is
imported on ascend without the simulator).

* Without triton-ascend: on the simulated host (the wheel's transfer_to_npu over the simulated NPU), a
  CUDA-written launch and Triton's driver raise a CapabilityError naming `pip install triton-ascend` and the
  CANN environment, where upstream Triton would die on `libcuda.so cannot found!`.
* With triton-ascend (L1): the wheel's own package in a fresh interpreter; the shim's libdevice mapping is
  in the module map its AscendBackend hands its code generator, and a kernel calling `libdevice.rsqrt`
  compiles through the wheel's frontend only with it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _ta import need_wheel

from cudashim.triton_route import ascend_compile

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_without_triton_ascend_the_first_launch_names_it(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "simulated"))
    try:
        from _sim import need_wheel as need_torch_npu_wheel, run_sim
    finally:
        sys.path.pop(0)
    need_torch_npu_wheel()
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent('''
        import torch, triton, triton.language as tl
        from cudashim.errors import CapabilityError
        from cudashim.triton_route import ascend_hardware

        # what the npu installer does once triton is imported on a real NPU host (here, over the simulated
        # NPU's own Triton route, which uninstall() must leave as it was)
        before = (triton.runtime.jit.JITFunction.run, triton.runtime.driver._active)
        ascend_hardware.install(triton)

        @triton.jit
        def add_one(x_ptr, n, BLOCK: tl.constexpr):
            o = tl.arange(0, BLOCK)
            tl.store(x_ptr + o, tl.load(x_ptr + o, mask=o < n) + 1, mask=o < n)

        x = torch.ones(8, device="cuda")
        print("DEVICE", x.device.type)
        try:
            add_one[(1,)](x, 8, BLOCK=8)
            print("LAUNCH ran")
        except CapabilityError as e:
            print("LAUNCH", e)
        try:
            triton.runtime.driver.active.get_active_torch_device()
            print("DRIVER answered")
        except CapabilityError as e:
            print("DRIVER", e)
        ascend_hardware.uninstall()
        print("RESTORED", (triton.runtime.jit.JITFunction.run, triton.runtime.driver._active) == before)
    '''))
    r = run_sim([str(prog)], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in r.stdout.splitlines() if " " in ln}
    assert out["DEVICE"] == "npu"
    for key, api in (("LAUNCH", "Triton kernel __main__:add_one"), ("DRIVER", "triton.runtime.driver.active")):
        msg = out[key]
        assert msg.startswith(api) and "cannot run on ascend with triton" in msg, msg
        assert f"pip install {ascend_compile.WHEEL_SPEC}" in msg and "set_env.sh" in msg and "bishengir-compile" in msg
        assert "[capability triton_kernels]" in msg
    assert out["RESTORED"] == "True"


_WITH_WHEEL = '''
import sys
sys.path[:0] = [{frontend!r}, {root!r}]
# the shim's package needs numpy; the interpreter's site-packages come last, after the wheel's triton
sys.path.append({site!r})
import triton, triton.language as tl
assert triton.__version__ == "3.2.0" and triton.__file__.startswith({frontend!r}), triton.__file__
from triton.backends import backends
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import ASTSource
from triton._C.libtriton import ir
from cudashim.triton_route import ascend_hardware
import kernel

def compiles():
    backend = backends["ascend"].compiler(GPUTarget("npu", "Ascend910B3", 0))
    opts = backend.parse_options({{}})
    ctx = ir.context(); ir.load_dialects(ctx); backend.load_dialects(ctx)
    src = ASTSource(kernel.rsqrt_kernel, {{"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}}, {{"BLOCK": 64}})
    try:
        src.make_ir(opts, backend.get_codegen_implementation(), backend.get_module_map(), ctx)
        return "yes"
    except Exception as e:
        return "no: " + str(e).splitlines()[-1]

print("TRITON_ASCEND", ascend_hardware.is_triton_ascend())
print("BEFORE", compiles())
ascend_hardware.install(triton)
print("AFTER", compiles())
from triton.language.extra.cuda import libdevice
print("CUDA_SPELLING", libdevice.__name__)
ascend_hardware.uninstall()
print("UNDONE", compiles())
'''

_KERNEL = '''
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice


@triton.jit
def rsqrt_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, libdevice.rsqrt(tl.load(x_ptr + o, mask=o < n)), mask=o < n)
'''


def test_with_triton_ascend_libdevice_is_mapped_in_its_backend(tmp_path: Path) -> None:
    need_wheel()
    (tmp_path / "kernel.py").write_text(_KERNEL)
    import numpy

    code = _WITH_WHEEL.format(frontend=str(ascend_compile.frontend_dir()), root=str(ROOT),
                              site=str(Path(numpy.__file__).parents[1]))
    # the kernel imports CUDA's spelling, which the wheel does not ship: installed first, as on the NPU host
    code = code.replace("import kernel\n", "ascend_hardware.install(triton); import kernel; ascend_hardware.uninstall()\n"
                        "ascend_hardware.install(triton); import triton.language.extra.cuda as _c\n"
                        "ascend_hardware.uninstall()\n")
    r = subprocess.run([sys.executable, "-S", "-E", "-s", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-3000:]
    out = dict(ln.split(" ", 1) for ln in r.stdout.splitlines() if " " in ln)
    assert out["TRITON_ASCEND"] == "True"
    assert out["BEFORE"].startswith("no: ") and "None" in out["BEFORE"]
    assert out["AFTER"] == "yes"
    assert out["CUDA_SPELLING"] == "triton.language.extra.libdevice"
    assert out["UNDONE"].startswith("no: ")
