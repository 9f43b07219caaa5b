"""The simulated NPU's device identity (issue 19): npu:N tensors of the PrivateUse1 core, the wheel's
transfer_to_npu over it, visibility as the CANN runtime applies it, copies that copy."""

from __future__ import annotations

import json
import zipfile

from _sim import need_wheel, run_sim

IDENTITY = r"""
import json, sys, torch
x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
y = x.cuda()                      # transfer_to_npu: Tensor.cuda is Tensor.npu
z = torch.ones(2, device="cuda:1")  # and device="cuda:N" means npu:N
y.add_(1)                          # the copy is not the CPU tensor
back = y.cpu()
back.mul_(10)                      # nor is the copy back the device tensor
import torch_npu


@torch.jit.script  # transfer_to_npu wraps torch.jit.script and reads torch_npu.utils._dynamo.use_jit_script
def scaled(t: torch.Tensor, k: float) -> torch.Tensor:
    return t * k + 1.0


_, jvp = torch.autograd.functional.jvp(lambda t: t * t, y, torch.ones_like(y))
print(json.dumps({
    "scripted": scaled(y, 2.0).cpu().tolist(), "jvp": jvp.cpu().tolist(),
    "y": str(y.device), "z": str(z.device), "is_cuda": y.is_cuda, "is_npu": y.is_npu,
    "x_untouched": x.tolist(), "y": y.cpu().tolist(), "back": back.tolist(),
    "count": torch.cuda.device_count(), "npu_count": torch.npu.device_count(),
    "name": torch.cuda.get_device_name(0), "mm": (y @ y.T).cpu().tolist(),
    "tnpu": torch_npu.__file__, "t2n": sys.modules["torch_npu.contrib.transfer_to_npu"].__file__,
    "fa": torch_npu.npu_fusion_attention.__module__,
    "fa_schema": str(torch_npu.npu_fusion_attention.default._schema).split("(")[0],
    "init": sys.modules["torch_npu"].__file__,
}))
"""


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_npu_tensors_copies_and_transfer_to_npu():
    wheel = need_wheel()
    r = run_sim(["-c", IDENTITY], {"CUDASHIM_NPU_DEVICES": "2"})
    assert r.returncode == 0, r.stderr[-4000:]
    got = _last_json(r.stdout)
    assert got["y"] == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert got["x_untouched"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert got["back"] == [[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]]
    assert got["mm"] == [[14.0, 32.0], [32.0, 77.0]]
    assert got["scripted"] == [[3.0, 5.0, 7.0], [9.0, 11.0, 13.0]]  # torch.jit.script runs through the shim
    assert got["jvp"] == [[2.0, 4.0, 6.0], [8.0, 10.0, 12.0]]  # torch's autograd.functional scripts helpers too
    assert got["z"] == "npu:1" and got["is_cuda"] is True and got["is_npu"] is True
    assert got["count"] == got["npu_count"] == 2
    assert "simulated" in got["name"]
    # torch_npu's operators are torch.ops.npu's, under the schema the wheel lists (ops.py computes it)
    assert got["fa"] == "torch._ops.npu" and got["fa_schema"] == "npu::npu_fusion_attention"
    # transfer_to_npu and torch_npu/__init__.py are the wheel's files, byte for byte
    with zipfile.ZipFile(wheel) as zf:
        assert open(got["t2n"], "rb").read() == zf.read("torch_npu/contrib/transfer_to_npu.py")
        assert open(got["init"], "rb").read() == zf.read("torch_npu/__init__.py")
    assert "SIMULATED" in r.stderr.splitlines()[0]


def test_ascend_rt_visible_devices_narrows_the_simulated_host():
    need_wheel()
    code = "import torch; print(torch.cuda.device_count(), torch.npu.device_count())"
    r = run_sim(["-c", code], {"ASCEND_RT_VISIBLE_DEVICES": "2,5,7"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[-2:] == ["3", "3"]
    r = run_sim(["-c", code])  # the simulated host: eight 910B
    assert r.stdout.split()[-2:] == ["8", "8"]


def test_bad_visible_devices_names_the_variable():
    need_wheel()
    r = run_sim(["-c", "import torch"], {"ASCEND_RT_VISIBLE_DEVICES": "0,9"})
    assert r.returncode != 0
    assert "ASCEND_RT_VISIBLE_DEVICES" in r.stderr and "'9'" in r.stderr


def test_missing_wheel_names_the_fix(tmp_path):
    r = run_sim(["-c", "import torch"], {"CUDASHIM_WHEEL_CACHE": str(tmp_path)})
    assert r.returncode != 0
    # the release built for the installed torch (torch-npu 2.13.0 for torch 2.13, 2.14.0 for 2.14 on)
    from cudashim._torch_compat import torch_npu_release

    assert "scripts/install" in r.stderr and f"torch-npu=={torch_npu_release()}" in r.stderr


def test_simulate_is_ascend_only():
    r = run_sim(["--platform", "cpu", "-c", "pass"])
    assert r.returncode == 2 and "--simulate simulates the Ascend NPU only" in r.stderr


def test_usage_lists_simulate():
    r = run_sim(["--help"])
    assert "[--simulate]" in r.stdout


def test_migration_report_says_simulated(tmp_path):
    need_wheel()
    report = tmp_path / "report.json"
    r = run_sim(["--report", str(report), "-c", "import torch; torch.cuda.synchronize(); torch.zeros(2, device='cuda')"])
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(report.read_text())
    assert data["platform"] == "ascend" and data["simulated"] is True
    assert "SIMULATED NPU on the CPU" in r.stderr


def test_bad_npu_device_count_stops_before_user_code():
    # no wheel needed: the bootstrap refuses the value before torch (or the simulated torch_npu) loads
    r = run_sim(["-c", "print('user code ran')"], {"CUDASHIM_NPU_DEVICES": "lots"})
    assert r.returncode == 2, r.stderr[-2000:]
    assert "CUDASHIM_NPU_DEVICES='lots'" in r.stderr and "user code ran" not in r.stdout
    r = run_sim(["-c", "print('user code ran')"], {"CUDASHIM_NPU_DEVICES": "65"})
    assert r.returncode == 2 and "0..64" in r.stderr


OVERFLOW = r"""
import torch
import torch_npu
for name, call in (("set_device(257)", lambda: torch.npu.set_device(257)),
                   ("memory_allocated(130)", lambda: torch.npu.memory_allocated(130))):
    try:
        call()
    except RuntimeError as e:
        print(name, "refused:", e)
    else:
        print(name, "accepted")
print("current", torch.npu.current_device())
"""


def test_device_index_past_eight_bits_is_refused_not_narrowed():
    """The core's bindings narrowed indices to 8 bits: set_device(257) selected npu:1 and
    memory_allocated(130) answered for the current device (-126 read as "current")."""
    need_wheel()
    r = run_sim(["-c", OVERFLOW], {"CUDASHIM_NPU_DEVICES": "2"})
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()[-3:]
    assert lines[0].startswith("set_device(257) refused: ") and "invalid device ordinal" in lines[0], lines  # CUDA's answer
    assert lines[1].startswith("memory_allocated(130) refused: Overflow when unpacking DeviceIndex"), lines
    assert lines[2] == "current 0", lines


GENERATORS = r"""
import json, torch, torch_npu
out = {"device": str(torch.Generator(device="npu").device)}
g = torch.Generator(device="npu").manual_seed(3)
a = torch.randn(4, device="npu", generator=g).cpu()
out["default"] = str(torch.npu.default_generators[0].device)  # filled by the first use of the device, as torch_npu's
g.manual_seed(3)
out["reproducible"] = bool(torch.equal(a, torch.randn(4, device="npu", generator=g).cpu()))
try:
    torch.randn(3, device="npu", generator=torch.Generator())
except RuntimeError as e:
    out["cpu_generator"] = str(e).splitlines()[0]
print(json.dumps(out))
"""


def test_generators_live_on_the_npu_and_a_cpu_generator_is_refused():
    """As torch_npu's NPUGeneratorImpl: npu generators report their device; a CPU generator handed to an npu
    operator fails ATen's check_generator, in its words."""
    need_wheel()
    r = run_sim(["-c", GENERATORS])
    assert r.returncode == 0, r.stderr[-3000:]
    got = _last_json(r.stdout)
    assert got["device"] == "npu:0" and got["default"] == "npu:0", got
    assert got["reproducible"] is True
    assert got["cpu_generator"] == "Expected a 'npu' device type for generator but found 'cpu'", got
