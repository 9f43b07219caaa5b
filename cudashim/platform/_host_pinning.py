"""Pinning existing host memory through the vendor runtimes: CUDA's cudaHostRegister and Ascend's
aclrtHostRegisterV2 (through ctypes on libascendcl.so), and what their error codes mean.

The Platform contract's `pin_host_memory` / `unpin_host_memory` call these; a failure that only costs
speed warns once per call site rather than stopping the program (pinning is a performance path).
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import CapabilityError

__all__ = ["acl_host_register", "bind_current_npu", "clear_cuda_last_error", "code", "load_libascendcl",
           "warn_unless_benign"]


def acl_host_register(loader: Callable[[], Any]) -> tuple[Any, Any]:
    """libascendcl's register and unregister functions, typed for 64-bit addresses; resolved once, at the
    platform's construction, so an old driver stops the program at start-up rather than at the first pin."""
    try:
        lib = loader()
    except OSError as e:
        raise CapabilityError(
            f"libascendcl.so could not be loaded on ascend ({e}); install the CANN toolkit/driver and source "
            "its set_env.sh so libascendcl.so is on LD_LIBRARY_PATH, or run with CUDASHIM_PLATFORM=cpu"
        ) from None
    register = getattr(lib, "aclrtHostRegisterV2", None)
    unregister = getattr(lib, "aclrtHostUnregister", None)
    if register is None or unregister is None:
        missing = [n for n, f in (("aclrtHostRegisterV2", register), ("aclrtHostUnregister", unregister)) if f is None]
        raise CapabilityError(
            f"{' and '.join(missing)} not found in libascendcl.so on ascend: the CANN driver is too old for "
            "host-memory registration; upgrade CANN to a release that provides aclrtHostRegisterV2"
        )
    # Without argtypes ctypes would pass a 64-bit address as a C int and truncate it.
    import ctypes

    register.argtypes = (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32)
    register.restype = ctypes.c_int
    unregister.argtypes = (ctypes.c_void_p,)
    unregister.restype = ctypes.c_int
    return register, unregister


def code(err: Any) -> int:
    """torch's cudart binding returns a pybind enum; ctypes returns an int."""
    try:
        return int(err)
    except (TypeError, ValueError):
        return int(getattr(err, "value", -1))


def warn_unless_benign(err: int, benign: tuple[int, ...], call: str, consequence: str) -> None:
    if err not in benign:
        import warnings

        warnings.warn(f"{call} failed (error {err}): {consequence}", RuntimeWarning, stacklevel=3)


def load_libascendcl() -> Any:
    # torch_npu links libascendcl.so, so the default search path finds the same copy and shares its state.
    import ctypes

    return ctypes.CDLL("libascendcl.so")


def bind_current_npu() -> None:
    import torch

    torch.npu.set_device(torch.npu.current_device())  # idempotent; binds the ACL context to this thread


def clear_cuda_last_error() -> None:
    """Reset the CUDA runtime's last error after a benign failure (torch's cudart binding has no
    cudaGetLastError): call it in the libcudart this process already mapped; best effort."""
    import ctypes

    try:
        with open("/proc/self/maps") as f:
            path = next((line.split()[-1] for line in f if "libcudart.so" in line), None)
        if path is not None:
            ctypes.CDLL(path).cudaGetLastError()
    except OSError:
        pass
