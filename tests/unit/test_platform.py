"""The Platform contract: fields, scale packing, host pinning (fake ACL library), distributed options, resolution."""

from __future__ import annotations

import ctypes
import sys
import types
import warnings

import pytest
import torch

import cudashim
from cudashim import _state
from cudashim.config import Config
from cudashim.errors import CapabilityError, EnvError
from cudashim.platform import resolve_platform_name
from cudashim.platform.contract import (
    PLATFORM_CLASSES,
    PlatformCPU,
    PlatformEnum,
    PlatformGPU,
    PlatformNPU,
    get_platform,
)
from cudashim.platform.peak import bf16_tflops_for


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    for var in ("CUDASHIM_PLATFORM", "CUDASHIM_NCCL_NUM_SMS", "CUDASHIM_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    _state.reset()
    yield
    _state.reset()


# ---- a fake libascendcl: records calls, returns scripted error codes --------------------------------------

class _FakeFn:
    def __init__(self, name: str, log: list, codes: list[int]):
        self.name, self.log, self.codes = name, log, codes
        self.argtypes = self.restype = None

    def __call__(self, *args):
        self.log.append((self.name, args))
        return self.codes.pop(0) if self.codes else 0


class _FakeACL:
    def __init__(self, register_codes=(), unregister_codes=(), missing=()):
        self.log: list = []
        if "aclrtHostRegisterV2" not in missing:
            self.aclrtHostRegisterV2 = _FakeFn("register", self.log, list(register_codes))
        if "aclrtHostUnregister" not in missing:
            self.aclrtHostUnregister = _FakeFn("unregister", self.log, list(unregister_codes))


class _FakeTensor:
    def __init__(self, ptr: int, nbytes: int):
        self._ptr, self.nbytes = ptr, nbytes

    def data_ptr(self) -> int:
        return self._ptr


def _npu(lib: _FakeACL) -> PlatformNPU:
    return PlatformNPU(acl_loader=lambda: lib, bind_device=lambda: lib.log.append(("bind", ())))


def test_fields_per_platform():
    gpu, cpu = PlatformGPU(), PlatformCPU()
    npu = _npu(_FakeACL())
    assert (gpu.name, gpu.tilelang_ops_backend, gpu.distributed_backend) == ("nvidia", "cuda", "nccl")
    assert (npu.name, npu.tilelang_ops_backend, npu.distributed_backend) == ("ascend", "ascend", "hccl")
    assert (cpu.name, cpu.tilelang_ops_backend, cpu.distributed_backend) == ("cpu", "torch", "gloo")
    assert [p.enum for p in (gpu, npu, cpu)] == [PlatformEnum.GPU, PlatformEnum.NPU, PlatformEnum.CPU]
    assert (gpu.is_gpu, gpu.is_npu, gpu.is_cpu) == (True, False, False)
    assert (npu.is_gpu, npu.is_npu, npu.is_cpu) == (False, True, False)
    assert (cpu.is_gpu, cpu.is_npu, cpu.is_cpu) == (False, False, True)
    assert set(PLATFORM_CLASSES) == {"nvidia", "ascend", "cpu"}


def test_fp8_sf_type_and_pack_factor_agree():
    npu = _npu(_FakeACL())
    assert PlatformGPU().fp8_sf_type is torch.int32
    assert npu.fp8_sf_type is torch.int16
    assert PlatformCPU().fp8_sf_type is torch.int32
    for plat in (PlatformGPU(), npu, PlatformCPU()):
        # one UE8M0 scale is one byte: the container holds as many as it has bytes
        assert plat.sf_pack_factor() == torch.empty(0, dtype=plat.fp8_sf_type).element_size()


def test_sf_data_as_int32_keeps_the_bytes():
    npu = _npu(_FakeACL())
    scales = torch.arange(3 * 5 * 8, dtype=torch.uint8).reshape(3, 5, 8)  # 8 UE8M0 scales per row
    for plat in (PlatformGPU(), npu):
        packed = scales.view(plat.fp8_sf_type)  # (3, 5, 8 / pack)
        words = plat.sf_data_as_int32(packed, (3, 5))
        assert words.dtype is torch.int32 and words.shape == (3, 5, 2)
        assert torch.equal(words.view(torch.uint8), scales)
        assert torch.equal(plat.sf_data_as_int32(packed), words)
    # GPU form with one int32 per row (sf_packs == 1): leading shape only
    one = scales[..., :4].contiguous().view(torch.int32).reshape(3, 5)
    assert PlatformGPU().sf_data_as_int32(one, (3, 5)).shape == (3, 5, 1)


def test_sf_data_as_int32_refuses_partial_words():
    odd = torch.zeros(3, 1, dtype=torch.int16)  # 2 bytes per row: not a whole int32
    with pytest.raises(ValueError, match="whole number of int32"):
        PlatformCPU.sf_data_as_int32(odd, (3,))
    with pytest.raises(ValueError, match="whole number of int32"):
        PlatformCPU.sf_data_as_int32(odd)


# ---- NPU host pinning through the fake ACL ------------------------------------------------------------------

def test_npu_resolves_and_declares_argtypes_once():
    lib = _FakeACL()
    _npu(lib)
    assert lib.aclrtHostRegisterV2.argtypes == (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32)
    assert lib.aclrtHostRegisterV2.restype is ctypes.c_int
    assert lib.aclrtHostUnregister.argtypes == (ctypes.c_void_p,)
    assert lib.aclrtHostUnregister.restype is ctypes.c_int


def test_npu_pin_binds_device_then_registers_pinned():
    lib = _FakeACL(register_codes=[0])
    npu = _npu(lib)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        npu.pin_host_memory(_FakeTensor(0x7F0000001000, 4096))
        npu.unpin_host_memory(0x7F0000001000)
    assert lib.log == [
        ("bind", ()),
        ("register", (0x7F0000001000, 4096, 0x10000000)),
        ("bind", ()),
        ("unregister", (0x7F0000001000,)),
    ]


@pytest.mark.parametrize("code,warns", [(0, False), (507910, False), (507911, True), (107002, True)])
def test_npu_pin_error_codes(code, warns):
    npu = _npu(_FakeACL(register_codes=[code]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        npu.pin_host_memory(_FakeTensor(0x1000, 64))
    assert len(caught) == (1 if warns else 0)
    if warns:
        assert "pageable slow path" in str(caught[0].message) and str(code) in str(caught[0].message)


@pytest.mark.parametrize("code,warns", [(0, False), (507911, False), (507910, True), (1, True)])
def test_npu_unpin_error_codes(code, warns):
    npu = _npu(_FakeACL(unregister_codes=[code]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        npu.unpin_host_memory(0x2000)
    assert len(caught) == (1 if warns else 0)
    if warns:
        assert "aclrtHostUnregister" in str(caught[0].message)


@pytest.mark.parametrize("missing", [("aclrtHostRegisterV2",), ("aclrtHostUnregister",),
                                     ("aclrtHostRegisterV2", "aclrtHostUnregister")])
def test_npu_missing_symbols_fail_at_construction(missing):
    with pytest.raises(CapabilityError) as exc:
        _npu(_FakeACL(missing=missing))
    msg = str(exc.value)
    assert all(name in msg for name in missing) and "CANN" in msg and "ascend" in msg


def test_npu_missing_library_fails_at_construction():
    def loader():
        raise OSError("libascendcl.so: cannot open shared object file")

    with pytest.raises(CapabilityError, match="libascendcl.so.*CANN"):
        PlatformNPU(acl_loader=loader, bind_device=lambda: None)


# ---- GPU pinning through a fake cudart ----------------------------------------------------------------------

@pytest.mark.parametrize("code,warns", [(0, False), (712, False), (2, True)])
def test_gpu_pin_checks_cudart_result(monkeypatch, code, warns):
    calls = []
    fake = types.SimpleNamespace(
        cudaHostRegister=lambda p, n, f: calls.append(("reg", p, n, f)) or code,
        cudaHostUnregister=lambda p: calls.append(("unreg", p)) or 0,
    )
    monkeypatch.setattr(torch.cuda, "cudart", lambda: fake)
    t = torch.zeros(16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PlatformGPU().pin_host_memory(t)
        PlatformGPU().unpin_host_memory(t.data_ptr())
    assert calls == [("reg", t.data_ptr(), 64, 0), ("unreg", t.data_ptr())]
    assert len(caught) == (1 if warns else 0)


def test_cpu_pin_is_a_noop_on_a_real_tensor():
    t = torch.arange(8.0)
    PlatformCPU().pin_host_memory(t)
    PlatformCPU().unpin_host_memory(t.data_ptr())
    assert torch.equal(t, torch.arange(8.0)) and not t.is_pinned()


# ---- distributed options ------------------------------------------------------------------------------------

class _FakeNCCLOptions:
    def __init__(self):
        self.config = types.SimpleNamespace(min_ctas=None, max_ctas=None)


@pytest.mark.parametrize("env,expected", [(None, 32), ("24", 24)])
def test_gpu_distributed_options_pin_ctas(monkeypatch, env, expected):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "ProcessGroupNCCL", types.SimpleNamespace(Options=_FakeNCCLOptions), raising=False)
    if env is not None:
        monkeypatch.setenv("CUDASHIM_NCCL_NUM_SMS", env)
    opts = PlatformGPU().get_distributed_options()
    assert (opts.config.min_ctas, opts.config.max_ctas) == (expected, expected)


def test_gpu_distributed_options_without_nccl_says_so(monkeypatch):
    import torch.distributed as dist

    monkeypatch.delattr(dist, "ProcessGroupNCCL", raising=False)
    with pytest.raises(CapabilityError, match="NCCL"):
        PlatformGPU().get_distributed_options()


def test_bad_num_sms_is_an_env_error(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "ProcessGroupNCCL", types.SimpleNamespace(Options=_FakeNCCLOptions), raising=False)
    monkeypatch.setenv("CUDASHIM_NCCL_NUM_SMS", "lots")
    with pytest.raises(EnvError, match="CUDASHIM_NCCL_NUM_SMS"):
        PlatformGPU().get_distributed_options()


def test_npu_distributed_options(monkeypatch):
    npu = _npu(_FakeACL())
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # not installed
    with pytest.raises(CapabilityError, match="torch-npu"):
        npu.get_distributed_options()

    class HCCLOptions:
        pass

    fake = types.ModuleType("torch_npu")
    fake._C = types.SimpleNamespace(_distributed_c10d=types.SimpleNamespace(
        ProcessGroupHCCL=types.SimpleNamespace(Options=HCCLOptions)))
    monkeypatch.setitem(sys.modules, "torch_npu", fake)
    assert isinstance(npu.get_distributed_options(), HCCLOptions)
    fake._C = types.SimpleNamespace()
    assert npu.get_distributed_options() is None


def test_cpu_collectives_run_on_gloo():
    import torch.distributed as dist

    plat = PlatformCPU()
    assert plat.get_distributed_options() is None
    dist.init_process_group(plat.distributed_backend, store=dist.HashStore(), rank=0, world_size=1,
                            pg_options=plat.get_distributed_options())
    try:
        t = torch.tensor([1.0, 2.0])
        dist.all_reduce(t)
        assert dist.get_backend() == "gloo" and torch.equal(t, torch.tensor([1.0, 2.0]))
    finally:
        dist.destroy_process_group()


# ---- peak TFLOPS ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,peak", [
    ("NVIDIA H200", 989.0), ("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 PCIe", 756.0),
    ("NVIDIA H20", 148.0), ("NVIDIA B200", 2250.0), ("NVIDIA GB200", 2500.0),
    ("NVIDIA A100-SXM4-80GB", 312.0), ("Ascend 950PR", 432.0), ("Ascend910B3", None),
    ("NVIDIA GeForce RTX 4090", None), (None, None),
])
def test_bf16_tflops_table(name, peak):
    assert bf16_tflops_for(name) == peak
    if name is not None:
        assert PlatformGPU().bf16_tflops_limit(name) == peak


def test_cpu_has_no_peak():
    assert PlatformCPU().bf16_tflops_limit() is None


# ---- resolution and caching ---------------------------------------------------------------------------------

def _fake_hardware(monkeypatch, kind: str) -> list:
    calls: list = []
    mod = types.ModuleType("cudashim.hardware")
    mod.accelerator_kind = lambda root=None: calls.append(root) or kind
    mod._reset = lambda: None  # cudashim._state.reset() calls the loaded hardware package's _reset
    monkeypatch.setitem(sys.modules, "cudashim.hardware", mod)
    return calls


def test_env_beats_config_beats_detection(monkeypatch):
    calls = _fake_hardware(monkeypatch, "nvidia")
    cfg = Config(path=None, platform="ascend")
    name, why = resolve_platform_name(cfg, {"CUDASHIM_PLATFORM": "CPU"})
    assert name == "cpu" and "CUDASHIM_PLATFORM" in why
    name, why = resolve_platform_name(cfg, {})
    assert name == "ascend" and "platform" in why
    assert calls == []  # detection never ran while something above it decided
    name, why = resolve_platform_name(Config(), {})
    assert name == "nvidia" and "NVIDIA" in why and calls == ["/"]
    resolve_platform_name(Config())  # no environ given: the hardware layer reads the process's own
    assert calls == ["/", None]


def test_detection_uses_the_given_sysroot(monkeypatch, tmp_path):
    calls = _fake_hardware(monkeypatch, "cpu")
    name, why = resolve_platform_name(Config(), {"CUDASHIM_SYSROOT": str(tmp_path)})
    assert name == "cpu" and calls == [str(tmp_path)] and str(tmp_path) in why


def test_garbage_platform_env_is_an_error():
    with pytest.raises(EnvError, match="CUDASHIM_PLATFORM"):
        resolve_platform_name(Config(), {"CUDASHIM_PLATFORM": "tpu"})


def test_get_platform_is_cached_and_reset(monkeypatch):
    monkeypatch.setenv("CUDASHIM_PLATFORM", "cpu")
    first = get_platform()
    assert isinstance(first, PlatformCPU) and get_platform() is first and cudashim.PLATFORM is first
    monkeypatch.setenv("CUDASHIM_PLATFORM", "nvidia")
    assert get_platform() is first  # cached: the environment is read once
    _state.reset()
    assert isinstance(get_platform(), PlatformGPU)


# ---- property: the int32 view is the same bytes, for any leading shape and word count -------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(leading=st.lists(st.integers(1, 4), min_size=1, max_size=3), words=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_sf_view_roundtrip_property(leading, words, seed):
    gen = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (*leading, words * 4), dtype=torch.uint8, generator=gen)
    for plat in (PlatformGPU(), PlatformCPU(), PlatformNPU(acl_loader=_FakeACL, bind_device=lambda: None)):
        packed = raw.view(plat.fp8_sf_type)  # what a kernel allocating PLATFORM.fp8_sf_type holds
        assert packed.shape[-1] * plat.sf_pack_factor() == words * 4
        out = plat.sf_data_as_int32(packed, tuple(leading))
        assert out.shape == (*leading, words) and torch.equal(out.view(torch.uint8), raw)
