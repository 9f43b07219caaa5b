"""The Platform contract: what code must know about the machine it runs on, in four fields and a few methods.

`cudashim.platform.resolve_platform_name()` decides *which* platform (CUDASHIM_PLATFORM > config > hardware detection) without
importing torch; `get_platform()` builds the matching class once. Everything that needs torch (dtypes, host
pinning, process-group options) imports it inside the method, so `import cudashim.platform` stays light.
"""

from __future__ import annotations

import enum

from .. import _state, envs
from ..errors import CapabilityError
from . import PLATFORMS, resolve_platform_name
from . import _host_pinning
from .peak import bf16_tflops_for, first_device_name

# ctypes, re and warnings are imported by the few methods that use them; the bootstrap imports
# the package only (this module's enum would cost every shimmed interpreter's start-up)
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable

    import torch

__all__ = [
    "PlatformEnum",
    "Platform",
    "PlatformGPU",
    "PlatformNPU",
    "PlatformCPU",
    "PLATFORM_CLASSES",
    "platform_name",
    "get_platform",
]


class PlatformEnum(enum.Enum):
    GPU = "gpu"
    NPU = "npu"
    CPU = "cpu"


class Platform:
    """Base contract. Subclasses fill the four fields and the host-pinning / distributed methods."""

    enum: PlatformEnum
    name: str  # "nvidia" | "ascend" | "cpu": the same names as CUDASHIM_PLATFORM and the config
    tilelang_ops_backend: str  # the kernels/ sub-package that ops.py dispatches to
    distributed_backend: str  # torch.distributed backend for device collectives
    _sf_dtype: str  # torch dtype name of the UE8M0 scale container; resolved lazily (no torch at import)
    _sf_itemsize: int

    @property
    def fp8_sf_type(self) -> torch.dtype:
        """Container dtype that packs UE8M0 (1-byte) scales: `sf_pack_factor()` scales per element."""
        import torch

        return getattr(torch, self._sf_dtype)

    def sf_pack_factor(self) -> int:
        """How many 1-byte UE8M0 scales one `fp8_sf_type` element holds (4 on GPU/CPU, 2 on NPU)."""
        return self._sf_itemsize

    @staticmethod
    def sf_data_as_int32(sf_data: torch.Tensor, leading_shape: tuple[int, ...] | None = None) -> torch.Tensor:
        """View packed UE8M0 scale bytes as the int32 words load kernels read (a view, no copy).

        With `leading_shape`, the result is (*leading_shape, words); without it the last dimension's bytes
        are regrouped. Both need a whole number of 4-byte words per row.
        """
        import torch

        if leading_shape is not None:
            rows = 1
            for d in leading_shape:
                rows *= int(d)
            nbytes = sf_data.numel() * sf_data.element_size()
            if rows == 0 or nbytes % rows or (nbytes // rows) % 4:
                raise ValueError(
                    f"sf_data of shape {tuple(sf_data.shape)} ({sf_data.dtype}) does not hold a whole number of "
                    f"int32 words per row of leading shape {tuple(leading_shape)}; pad the scale dimension to 4 bytes"
                )
            sf_data = sf_data.reshape(*leading_shape, -1)
        elif sf_data.dim() == 0 or (sf_data.shape[-1] * sf_data.element_size()) % 4:
            raise ValueError(
                f"sf_data of shape {tuple(sf_data.shape)} ({sf_data.dtype}) has a last dimension that is not a "
                "whole number of int32 words; pass leading_shape or pad the scale dimension to 4 bytes"
            )
        return sf_data.view(torch.uint8).view(torch.int32)

    @property
    def is_gpu(self) -> bool:
        return self.enum is PlatformEnum.GPU

    @property
    def is_npu(self) -> bool:
        return self.enum is PlatformEnum.NPU

    @property
    def is_cpu(self) -> bool:
        return self.enum is PlatformEnum.CPU

    def pin_host_memory(self, tensor: torch.Tensor) -> None:
        """Page-lock `tensor`'s host memory in place for fast H2D copies; default: nothing to do."""

    def unpin_host_memory(self, ptr: int) -> None:
        """Undo `pin_host_memory` for the buffer starting at `ptr`; default: nothing to do."""

    def get_distributed_options(self) -> object:
        """pg_options for device process groups of `distributed_backend`; every platform must say."""
        raise NotImplementedError(f"{type(self).__name__}.get_distributed_options")

    def bf16_tflops_limit(self, device_name: str | None = None) -> float | None:
        """Dense BF16 peak (TFLOPS) of this platform's chip, from BF16_TFLOPS; None when unknown."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class PlatformGPU(Platform):
    enum = PlatformEnum.GPU
    name = "nvidia"
    tilelang_ops_backend = "cuda"
    distributed_backend = "nccl"
    _sf_dtype, _sf_itemsize = "int32", 4  # four UE8M0 scales per int32
    # cudaErrorHostMemoryAlreadyRegistered / NotRegistered: pinning twice or unpinning twice is harmless
    _BENIGN = (0, 712, 713)

    def pin_host_memory(self, tensor: torch.Tensor) -> None:
        import torch

        # A failed cudaHostRegister, even a benign one, leaves the runtime's last error set and
        # torch's next kernel launch check raises it: don't provoke the error.
        if tensor.is_pinned():
            return
        err = _host_pinning.code(torch.cuda.cudart().cudaHostRegister(tensor.data_ptr(), tensor.nbytes, 0))
        if err:
            _host_pinning.clear_cuda_last_error()
        _host_pinning.warn_unless_benign(err, self._BENIGN, f"cudaHostRegister(0x{tensor.data_ptr():x}, {tensor.nbytes})",
                            "H2D/D2H copies from this buffer take the pageable slow path")

    def unpin_host_memory(self, ptr: int) -> None:
        import torch

        err = _host_pinning.code(torch.cuda.cudart().cudaHostUnregister(ptr))
        if err:
            _host_pinning.clear_cuda_last_error()
        _host_pinning.warn_unless_benign(err, self._BENIGN, f"cudaHostUnregister(0x{ptr:x})",
                            "the buffer may stay page-locked until the process exits")

    def get_distributed_options(self) -> object:
        import torch.distributed as dist

        options_cls = getattr(getattr(dist, "ProcessGroupNCCL", None), "Options", None)
        if options_cls is None:
            raise CapabilityError(
                "torch.distributed.ProcessGroupNCCL is not available on nvidia: this torch build has no NCCL; "
                "install a CUDA build of torch, or run with CUDASHIM_PLATFORM=cpu to use Gloo"
            )
        options = options_cls()
        # Pin NCCL to a fixed number of CTAs so collectives do not crowd out compute kernels' SMs.
        sms = envs.get("CUDASHIM_NCCL_NUM_SMS")
        options.config.min_ctas = sms
        options.config.max_ctas = sms
        return options

    def bf16_tflops_limit(self, device_name: str | None = None) -> float | None:
        return bf16_tflops_for(device_name or first_device_name("nvidia"))


class PlatformNPU(Platform):
    enum = PlatformEnum.NPU
    name = "ascend"
    tilelang_ops_backend = "ascend"
    distributed_backend = "hccl"
    _sf_dtype, _sf_itemsize = "int16", 2  # two UE8M0 scales per int16

    _ACL_SUCCESS = 0
    _ACL_HOST_REG_PINNED = 0x10000000  # ACL_HOST_REG_PINNED in acl_rt.h
    _ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 507910
    _ACL_ERROR_HOST_MEMORY_NOT_REGISTERED = 507911

    def __init__(
        self,
        *,
        acl_loader: Callable[[], Any] | None = None,
        bind_device: Callable[[], None] | None = None,
    ) -> None:
        # Resolved once here, so an old driver stops the program at start-up rather than at the first pin.
        self._register, self._unregister = _host_pinning.acl_host_register(acl_loader or _host_pinning.load_libascendcl)
        self._bind_device = bind_device or _host_pinning.bind_current_npu

    def pin_host_memory(self, tensor: torch.Tensor) -> None:
        # The ACL context is per thread: a pool created on one thread and pinned on another fails with 107002.
        self._bind_device()
        ptr, nbytes = tensor.data_ptr(), tensor.nbytes
        err = self._register(ptr, nbytes, self._ACL_HOST_REG_PINNED)
        _host_pinning.warn_unless_benign(err, (self._ACL_SUCCESS, self._ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED),
                            f"aclrtHostRegisterV2(0x{ptr:x}, {nbytes}, PINNED)",
                            "H2D/D2H copies from this buffer take the pageable slow path")

    def unpin_host_memory(self, ptr: int) -> None:
        self._bind_device()
        err = self._unregister(ptr)
        # Any other failure warns: a leaked pin holds host memory until the process exits.
        _host_pinning.warn_unless_benign(err, (self._ACL_SUCCESS, self._ACL_ERROR_HOST_MEMORY_NOT_REGISTERED),
                            f"aclrtHostUnregister(0x{ptr:x})", "the buffer may stay page-locked until the process exits")

    def get_distributed_options(self) -> object:
        try:
            import torch_npu  # noqa: F401
        except ImportError:
            raise CapabilityError(
                "HCCL process-group options are not available on ascend: torch_npu is not installed; "
                "pip install torch-npu matching your torch version"
            ) from None
        c10d = getattr(getattr(torch_npu, "_C", None), "_distributed_c10d", None)
        options_cls = getattr(getattr(c10d, "ProcessGroupHCCL", None), "Options", None)
        # HCCL has no CTA knob; its buffers/timeouts come from HCCL_* variables the bootstrap sets.
        return options_cls() if options_cls is not None else None

    def bf16_tflops_limit(self, device_name: str | None = None) -> float | None:
        return bf16_tflops_for(device_name or first_device_name("ascend"))


class PlatformSimulatedNPU(PlatformNPU):
    """ascend on the simulated NPU (CUDASHIM_SIMULATE=1): PlatformNPU minus what needs CANN.

    No simulated host has libascendcl (host-memory registration: the simulated NPU's memory is host
    memory, so registering a buffer has nothing to do: ACL_SUCCESS) nor bisheng, the AscendC compiler
    the `ascend` kernel backend lowers to: the kernel library takes its `torch` backend, the one the cpu
    platform runs and tests. Everything else is PlatformNPU's.
    """

    tilelang_ops_backend = "torch"

    def __init__(self, *, bind_device: Callable[[], None] | None = None) -> None:
        self._register = self._unregister = lambda *args: self._ACL_SUCCESS
        self._bind_device = bind_device or (lambda: None)


class PlatformCPU(Platform):
    enum = PlatformEnum.CPU
    name = "cpu"
    tilelang_ops_backend = "torch"
    distributed_backend = "gloo"
    _sf_dtype, _sf_itemsize = "int32", 4  # same packing as CUDA so shapes match the CUDA-written code

    def get_distributed_options(self) -> object:
        return None  # Gloo needs no options


PLATFORM_CLASSES: dict[str, type[Platform]] = {c.name: c for c in (PlatformGPU, PlatformNPU, PlatformCPU)}
assert set(PLATFORM_CLASSES) == set(PLATFORMS), "every platform name needs its contract class"


_cache: dict[str, Any] = {}


def platform_name() -> str:
    """The current platform's name without building the Platform (cheap, cached with it)."""
    if "platform" in _cache:
        return _cache["platform"].name
    if "name" not in _cache:
        from . import settled

        # an activated process keeps the platform its activation settled, from the config of the
        # project it runs: searching again from the working directory could read another folder's
        name = settled()
        if name is None:
            from ..config import load_config

            name = resolve_platform_name(load_config())[0]
        _cache["name"] = name
    return _cache["name"]


def get_platform() -> Platform:
    """The Platform of this process, built once; `_state.reset()` forgets it."""
    plat = _cache.get("platform")
    if plat is None:
        cls = PLATFORM_CLASSES[platform_name()]
        if cls is PlatformNPU and envs.get("CUDASHIM_SIMULATE"):  # no CANN on the simulated host
            cls = PlatformSimulatedNPU
        plat = _cache["platform"] = cls()
    return plat


@_state.on_reset
def _reset() -> None:
    _cache.clear()
