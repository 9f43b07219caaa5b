"""torch_npu._C on the simulated NPU: the native layer the wheel's whole Python package runs over.

The torch-npu wheel's Python (every module of its torch_npu package, unchanged: site.py) calls
torch_npu._C for everything the NPU runtime does. Here each of those names is answered by the
simulated device's core (csrc/, keyed to PrivateUse1 and named npu), with the semantics of the C++
binding it stands for (Ascend/pytorch at the wheel's tag, v26.2.0-beta.1-pytorch2.13.0: the module
table of torch_npu/csrc/npu/Module.cpp, the allocator's torch_npu/csrc/core/npu/NPUAllocatorConfig.cpp,
the CANN queries of torch_npu/csrc/core/npu/GetCANNInfo.cpp). What needs CANN itself (dumps, IPC
handles, ACL op compilation, the profiler's device side) raises torch_npu's own error, a RuntimeError
ending in its error code (`ERR00007 PTA feature not supported`), and is listed in NEEDS_CANN.

releases/<release>/torch_npu_natives.json (scripts/npu_natives.py) lists every name the wheel's Python reaches; the
check tests/ascend/test_natives.py holds each to one of: defined here, in NEEDS_CANN, or in ABSENT
(names of optional builds the wheel probes with hasattr: absent here as in a build without them).
"""

from __future__ import annotations

import enum
import itertools
import os
import sys
import threading
import time
import types
from typing import Any, Callable

__all__ = ["build", "NEEDS_CANN", "ABSENT", "cann_version", "CannRequired", "SOC_VERSIONS"]

#: torch_npu's SocVersion numbers (torch_npu/csrc/core/npu/NpuVariables.h) of the parts a profile may name
SOC_VERSIONS = {"Ascend910B1": 220, "Ascend910B2": 221, "Ascend910B2C": 222, "Ascend910B3": 223, "Ascend910B4": 224,
                "Ascend910B4-1": 225, "Ascend910_9391": 250, "Ascend910_9392": 251, "Ascend910_9381": 252}

from .device import DEFAULT_CANN_VERSION, cann_version  # noqa: E402 - re-exported: the queries live with the device

#: names the wheel probes with hasattr() and copes without: parts of builds the simulated NPU is not
ABSENT = {
    "_C": {"mlir", "dvm", "_afd_init", "_rpc_npu_init", "_distributed_rpc", "_afd"},
}

#: names that need CANN itself: each raises torch_npu's RuntimeError saying so
NEEDS_CANN = {
    "_C": {
        "_aclop_start_dmp": "ACL op dump", "_aclop_start_dump": "ACL op dump", "_aclop_stop_dump": "ACL op dump",
        "_npu_initDump": "ACL dump", "_npu_setDump": "ACL dump", "_npu_finalizeDump": "ACL dump",
        "_aclnn_reselect_static_kernel": "aclnn static kernels",
        "_aclnn_reselect_static_kernel_with_path": "aclnn static kernels",
        "_new_shared_npu": "IPC memory handles (aclrtIpcMem)", "_share_npu_": "IPC memory handles (aclrtIpcMem)",
        "_release_ipc_counter_npu": "IPC memory handles (aclrtIpcMem)",
        "_npu_from_dlpack": "DLPack over ACL memory", "_npu_to_dlpack": "DLPack over ACL memory",
        "_npu_stress_detect": "the device's stress detection (aclrtDeviceTaskAbort)",
        "_npu_restart_device": "device restart (aclrtResetDevice)", "_npu_stopDevice": "device stop",
        "_npu_check_uce_in_memory": "UCE memory fault queries", "_npu_get_uce_addr": "UCE memory fault queries",
        "_recovery_all_npu_stream": "stream recovery after a device fault",
        "_npu_sleep": "device sleep (aclrtMemSleep)",
        "_get_silent_check_version": "silent data corruption checks (CANN's ASD)",
        "_npu_customAllocator": "pluggable allocators loaded from a shared library",
        "_npu_changeCurrentAllocator": "pluggable allocators loaded from a shared library",
        "_activate_npu_trace": "the NPU sanitizer's callbacks from the runtime",
        "_launch_host_func": "host functions on a stream (aclrtLaunchCallback)",
        "_launch_host_func_pending": "host functions on a stream (aclrtLaunchCallback)",
        "_subscribe_report": "host functions on a stream (aclrtSubscribeReport)",
        "_unsubscribe_report": "host functions on a stream (aclrtUnSubscribeReport)",
        "_construct_storage_from_data_pointer": "storages over foreign device pointers",
        "_construct_NPU_Tensor_From_Storage_And_Metadata": "storages over foreign device pointers",
        "_tensor_construct_from_storage": "storages over foreign device pointers",
    },
    "_C._profiler": {
        "_init_profiler": "the NPU profiler (msprof)", "_start_profiler": "the NPU profiler (msprof)",
        "_stop_profiler": "the NPU profiler (msprof)", "_finalize_profiler": "the NPU profiler (msprof)",
        "_warmup_profiler": "the NPU profiler (msprof)",
    },
    "_C._cd": {"cast_to_fp8": "CANN's FP8 cast kernels", "cast_from_fp8": "CANN's FP8 cast kernels",
               "cast_to_fp8_noalloc": "CANN's FP8 cast kernels"},
    "_C._distributed_c10d": {"ProcessGroupLCCL": "LCCL (CANN's intra-node collectives)",
                             "ParallelStore": "torch_npu's ParallelStore server"},
}


class CannRequired(RuntimeError):
    """torch_npu's error for what the simulated NPU cannot do without CANN (a RuntimeError, as its C++ raises)."""


def _pta(code: str = "ERR00007", msg: str = "feature not supported") -> str:
    return (f"\n[ERROR] {time.strftime('%Y-%m-%d-%H:%M:%S', time.localtime())} (PID:{os.getpid()}, Device:-1, "
            f"RankID:-1) {code} PTA {msg}")


def _cann_required(qualname: str, what: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise CannRequired(f"torch_npu.{qualname} needs CANN ({what}), which the simulated NPU does not have; "
                           f"run this part on an NPU" + _pta())

    call.__name__ = qualname.rsplit(".", 1)[-1]
    call.__qualname__ = call.__name__
    return call


def _version_key(v: str) -> tuple[int, ...] | None:
    """A CANN version as an ordered key: 8.0.RC3 < 8.0.0 < 8.0.0.alpha001? torch_npu orders RC before the
    release of the same major.minor and alpha builds before both (VersionToNum, GetCANNInfo.cpp)."""
    parts = v.replace("-", ".").split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    key = [int(parts[0]), int(parts[1])]
    for p in parts[2:]:
        low = p.lower()
        if p.isdigit():
            key += [2, int(p)]
        elif low.startswith("rc") and low[2:].isdigit():
            key += [1, int(low[2:])]
        elif low.startswith("alpha") and low[5:].isdigit():
            key += [0, int(low[5:])]
        elif low.startswith("t") and low[1:].isdigit():
            key += [0, int(low[1:])]
        elif low.startswith("beta") and low[4:].isdigit():
            key += [0, int(low[4:])]
        else:
            return None
    return tuple(key)


def is_gte_cann_version(version: str, module: str = "CANN") -> bool:
    """IsGteCANNVersion (GetCANNInfo.cpp): DRIVER refused; a version below 8.1.RC1 refused; an
    unparsable one False."""
    if module == "DRIVER":
        raise RuntimeError("When the module is DRIVER, IsGteCANNVersion is not supported. " + _pta("ERR00001", "parameter error"))
    tokens = version.replace("-", ".").split(".")
    if len(tokens) < 2 or not tokens[0].isdigit():
        return False
    if int(tokens[0]) <= 8 and version < "8.1.RC1":
        raise RuntimeError(f'When the version {version} is less than "8.1.RC1", GetCANNVersion is not supported. '
                           + _pta("ERR00001", "parameter error"))
    cur, want = _version_key(cann_version(module)), _version_key(version)
    if cur is None or want is None:
        return False
    return cur >= want


def soc_name() -> str:
    from .device import profile

    prof = profile()
    name = getattr(prof, "name", "") if prof is not None else ""
    return name if name in SOC_VERSIONS else "Ascend910B1"


# ---------------------------------------------------------------- the allocator's settings

#: keys torch_npu takes from c10's AcceleratorAllocatorConfig (kNPUSupportAccKeys, NPUAllocatorConfig.cpp)
_ACC_KEYS = {"max_split_size_mb", "garbage_collection_threshold", "roundup_power2_divisions", "expandable_segments",
             "pinned_use_background_threads", "large_segment_size_mb", "max_non_split_rounding_mb",
             "pinned_max_round_threshold_mb", "pinned_max_cached_size_mb"}
#: c10's own keys torch_npu refuses ("torch_npu not support key")
_ACC_ONLY = {"pinned_num_register_threads", "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
             "pinned_use_host_register", "per_process_memory_fraction_acc"}
#: NPUAllocatorConfig's own keys (NPUAllocatorConfig::getKeys)
_NPU_KEYS = {"pin_memory_expandable_segments", "pinned_mem_register", "base_addr_aligned_kb", "page_size",
             "segment_size_mb", "multi_stream_lazy_reclaim", "per_process_memory_fraction",
             "pinned_reserve_segment_size_mb", "release_lock_on_npumalloc", "throw_on_npumalloc_oom"}
_SETTINGS: dict[str, str] = {}


def _tokens(conf: str) -> list[str]:
    out, cur = [], ""
    for ch in conf:
        if ch in ",:[]":
            if cur.strip():
                out.append(cur.strip())
            out.append(ch)
            cur = ""
        elif not ch.isspace():
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_allocator_settings(conf: str, supported: set[str] | None = None) -> dict[str, str]:
    """NPUAllocatorConfig::parseArgs: key:value pairs, comma-separated; unknown keys, keys torch_npu
    does not take, and (for _set_allocator_settings) keys outside `supported` refused with its words;
    expandable_segments with max_split_size_mb or garbage_collection_threshold refused."""
    toks = _tokens(conf)
    out: dict[str, str] = {}
    i = 0
    while i < len(toks):
        key = toks[i]
        if key not in _ACC_KEYS and key not in _NPU_KEYS and key not in _ACC_ONLY:
            raise ValueError(f"Unrecognized key '{key}' in NPU allocator config, " + _pta("ERR01001", "invalid value"))
        if key in _ACC_ONLY:
            raise ValueError(f"torch_npu not support key '{key}' in NPU allocator config, " + _pta("ERR01001", "invalid value"))
        if supported is not None and key not in supported:
            raise ValueError(f"torch_npu.npu.memory._set_allocator_settings() unsupported setting: {key}"
                             + _pta("ERR01001", "invalid value"))
        if i + 2 >= len(toks) + 0 and (i + 1 >= len(toks) or toks[i + 1] != ":"):
            raise ValueError(f"Expected ':' after {key} in NPU allocator config" + _pta("ERR01001", "invalid value"))
        if toks[i + 1] != ":" or i + 2 >= len(toks):
            raise ValueError(f"Expected ':' and a value after {key} in NPU allocator config" + _pta("ERR01001", "invalid value"))
        if toks[i + 2] == "[":  # roundup_power2_divisions:[64:8,>:1]
            j = toks.index("]", i + 2)
            value = "".join(toks[i + 2:j + 1])
            i = j + 1
        else:
            value = toks[i + 2]
            i += 3
        if key in ("expandable_segments", "release_lock_on_npumalloc", "pin_memory_expandable_segments",
                   "pinned_mem_register", "pinned_use_background_threads", "throw_on_npumalloc_oom",
                   "multi_stream_lazy_reclaim") and value not in ("True", "False"):
            # NPUAllocatorConfig's own keys are TORCH_CHECKed (RuntimeError), c10's TORCH_CHECK_VALUEd
            error = RuntimeError if key in _NPU_KEYS else ValueError
            raise error(f"Expected a single True/False argument for {key}" + _pta("ERR00001", "parameter error"))
        if key == "base_addr_aligned_kb" and not (value.isdigit() and int(value) <= 16):
            raise ValueError("CachingAllocator option base_addr_aligned_kb error, must be [0~16], dtype is int"
                             + _pta("ERR01001", "invalid value"))
        if key == "per_process_memory_fraction":
            try:
                ok = 0.0 <= float(value) <= 1.0
            except ValueError:
                ok = False
            if not ok:
                raise ValueError("per_process_memory_fraction is invalid, set it in [0.0, 1.0]" + _pta("ERR01001", "invalid value"))
        if key in ("max_split_size_mb", "segment_size_mb", "page_size", "large_segment_size_mb",
                   "max_non_split_rounding_mb", "pinned_max_round_threshold_mb", "pinned_max_cached_size_mb",
                   "pinned_reserve_segment_size_mb") and not value.isdigit():
            raise ValueError(f"Expected a positive integer for {key}, got {value!r}" + _pta("ERR01001", "invalid value"))
        if key == "garbage_collection_threshold":
            try:
                ok = 0.0 < float(value) < 1.0
            except ValueError:
                ok = False
            if not ok:
                raise ValueError("garbage_collect_threshold is invalid, set it in (0.0, 1.0)")
        out[key] = value
        if i < len(toks):
            if toks[i] != ",":
                raise ValueError(f"Expected ',' after {key}:{value} in NPU allocator config" + _pta("ERR01001", "invalid value"))
            i += 1
    merged = dict(_SETTINGS, **out)
    if merged.get("expandable_segments") == "True" and ("max_split_size_mb" in merged or
                                                          float(merged.get("garbage_collection_threshold", 0)) != 0):
        raise RuntimeError("`max_split_size_mb` or `garbage_collection_threshold`, cannot be enabled with "
                           "`expandable_segments`, please set `expandable_segments` to `False`."
                           + _pta("ERR01000", "parameter error"))
    return out


#: what torch_npu.npu.memory._set_allocator_settings may change at run time (setAllocatorSettings,
#: NPUCachingAllocator.cpp: the list it hands parseArgs; any other key is refused)
RUNTIME_SETTINGS = {"expandable_segments", "max_split_size_mb", "max_non_split_rounding_mb", "release_lock_on_npumalloc",
                    "throw_on_npumalloc_oom", "per_process_memory_fraction", "pinned_max_round_threshold_mb",
                    "pinned_max_cached_size_mb"}


def allocator_settings() -> dict[str, str]:
    """The settings in force (PYTORCH_NPU_ALLOC_CONF at start-up, then _set_allocator_settings)."""
    return dict(_SETTINGS)


# ---------------------------------------------------------------- the native classes


#: the raw streams npuStreamCreate made (aclrtCreateStream): their handle, which is the id of the core's
#: stream behind them, to that stream
_RAW_STREAMS: dict[int, Any] = {}
#: host memory npuHostRegister registered (aclrtHostRegisterV2): address to size
_REGISTERED: dict[int, int] = {}
_ACL_ERROR_INVALID_PARAM = 100000
_ACL_HOST_REG_FLAGS = 0x2 | 0x10000000  # ACL_HOST_REG_MAPPED | ACL_HOST_REG_PINNED


def _npurt(torch: Any, core: Any) -> dict[str, Any]:
    """torch_npu._C._npurt (torch_npu/csrc/npu/npurt.cpp): the runtime calls it binds, each answering
    ACL's return code (0, or ACL_ERROR_INVALID_PARAM for a null pointer, a zero size, a flag ACL does
    not know, memory or a stream it does not hold)."""
    import ctypes

    def host_register(ptr: int, size: int, flags: int) -> int:
        if not ptr or size <= 0 or flags & ~_ACL_HOST_REG_FLAGS or not flags or ptr in _REGISTERED:
            return _ACL_ERROR_INVALID_PARAM
        _REGISTERED[int(ptr)] = int(size)
        return 0

    def host_unregister(ptr: int) -> int:
        return 0 if ptr and _REGISTERED.pop(int(ptr), None) is not None else _ACL_ERROR_INVALID_PARAM

    def stream_create(ptr: int) -> int:
        if not ptr:
            return _ACL_ERROR_INVALID_PARAM
        raw = torch.Stream(device=torch.device("npu", core.current_device()))
        _RAW_STREAMS[int(raw.stream_id)] = raw
        ctypes.c_void_p.from_address(int(ptr)).value = int(raw.stream_id)
        return 0

    def stream_destroy(handle: int) -> int:
        return 0 if handle and _RAW_STREAMS.pop(int(handle), None) is not None else _ACL_ERROR_INVALID_PARAM

    return {"npuHostRegister": host_register, "npuHostUnregister": host_unregister,
            "npuStreamCreate": stream_create, "npuStreamDestroy": stream_destroy}


def _stream_classes(torch: Any, core: Any, dm: Any) -> dict[str, Any]:
    type_index = int(torch._C._autograd.DeviceType.PrivateUse1)

    class _NPUStreamBase(torch.Stream):
        """THNPStream (torch_npu/csrc/npu/Stream.cpp): a c10 stream of the npu device, under torch.Stream."""

        def __new__(cls, priority: int = 0, stream_id: int = 0, device_index: int = 0, device_type: int = 0,
                    stream_ptr: int = 0, **kwargs: Any) -> Any:
            if stream_ptr:
                # THNPStream_pynew: an external stream, here one npuStreamCreate made (the simulator has no
                # other runtime to take one from)
                if priority != 0:
                    raise RuntimeError("Priority was explicitly set for an external stream"
                                       + _pta("ERR00001", "invalid parameter"))
                if kwargs.get("is_sync_launch"):
                    raise RuntimeError("is_sync_launch was explicitly set for an external stream"
                                       + _pta("ERR00001", "invalid parameter"))
                raw = _RAW_STREAMS.get(int(stream_ptr))
                if raw is None:
                    raise RuntimeError(f"{int(stream_ptr):#x} is not a stream of the simulated NPU's runtime (one "
                                       "torch_npu.npu.npurt().npuStreamCreate made)" + _pta("ERR00001", "invalid parameter"))
                return super().__new__(cls, stream_id=raw.stream_id, device_index=raw.device_index,
                                       device_type=raw.device_type)
            if stream_id or device_index or device_type:
                # THNPStream_pynew: the three read as unsigned (a negative one is PyArg's OverflowError), then
                # NPUStream::unpack3 checks the device type and index before the stream is made
                for name, value in (("stream_id", stream_id), ("device_index", device_index),
                                    ("device_type", device_type)):
                    if int(value) < 0:
                        raise OverflowError(f"can't convert negative int to unsigned ({name})")
                if device_type and int(device_type) != type_index:
                    raise RuntimeError(f"Invalid device type {device_type} for an NPU stream"
                                       + _pta("ERR00001", "invalid parameter"))
                if int(device_index) >= int(core.device_count()):
                    raise RuntimeError(f"Invalid device index {device_index} for an NPU stream: {core.device_count()} "
                                       "devices" + _pta("ERR00001", "invalid parameter"))
                return super().__new__(cls, stream_id=stream_id, device_index=device_index,
                                       device_type=device_type or type_index)
            return super().__new__(cls, device=torch.device("npu", core.current_device()), priority=priority)

        @property
        def npu_stream(self) -> int:
            return self.stream_id

        def query(self) -> bool:
            if self.stream_id in _RAW_STREAMS:
                raise RuntimeError("Cannot query external NPU stream status. The caller must track stream completion "
                                   "externally." + _pta("ERR00007", "feature not supported"))
            return super().query()

        def synchronize(self) -> None:
            if self.stream_id in _RAW_STREAMS:
                raise RuntimeError("External NPU stream is not supported in NPUStream::synchronize. The caller is "
                                   "responsible for synchronization of external streams."
                                   + _pta("ERR00007", "feature not supported"))
            super().synchronize()

        def set_data_preprocess_stream(self, is_data_preprocess_stream: bool = False) -> None:
            return None

        @staticmethod
        def priority_range() -> tuple[int, int]:
            return (0, -1)

    _last_stamp = [0]

    class _NPUEventBase:
        """THNPEvent (torch_npu/csrc/npu/Event.cpp): an event of the npu device over torch.Event."""

        def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                    graph_external: bool = False, **kwargs: Any) -> Any:
            self = super().__new__(cls)
            self._ev = torch.Event(device="npu", enable_timing=enable_timing, blocking=blocking)
            self._timing = enable_timing
            self._recorded = False
            return self

        def record(self, stream: Any = None) -> None:
            if stream is None:
                stream = torch.npu.current_stream()
            self._ev.record(torch.Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                                         device_type=stream.device_type))
            self._recorded = True
            # the device runs the stream's work as it is issued: the event completes now; events recorded
            # one after another complete one after another
            self._stamp = max(time.monotonic_ns() // 1000, _last_stamp[0] + 1)
            _last_stamp[0] = self._stamp

        def recorded_time(self) -> int:
            """NPUEvent::recorded_time: the timestamp, in microseconds, at which the recorded event completed."""
            if not self._recorded:
                raise RuntimeError("Event must be recorded before getting recorded timestamp."
                                   + _pta("ERR00005", "internal error"))
            self.synchronize()
            return self._stamp

        def reset(self, stream: Any = None) -> None:
            """NPUEvent::reset: nothing on a CANN with aclrtValueWait/aclrtValueWrite (the simulated CANN is
            one), where an event is reset by the runtime itself."""
            return None

        def wait(self, stream: Any = None) -> None:
            if stream is None:
                stream = torch.npu.current_stream()
            self._ev.wait(torch.Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                                       device_type=stream.device_type))

        def query(self) -> bool:
            return bool(self._ev.query())

        def elapsed_time(self, end_event: Any) -> float:
            if not (self._timing and end_event._timing):
                raise RuntimeError("npu_event_elapsed_time: both events must be created with enable_timing=True"
                                   + _pta("ERR00002", "invalid parameter"))
            if not (self._recorded and end_event._recorded):
                raise RuntimeError("Both events must be recorded before calculating elapsed time."
                                   + _pta("ERR00002", "invalid parameter"))
            return float(self._ev.elapsed_time(end_event._ev))

        def synchronize(self) -> None:
            self._ev.synchronize()

        def ipc_handle(self) -> Any:
            return _cann_required("_C._NPUEventBase.ipc_handle", "IPC event handles (aclrtIpcGetEventHandle)")()

        @classmethod
        def from_ipc_handle(cls, device: Any, handle: Any) -> Any:
            return _cann_required("_C._NPUEventBase.from_ipc_handle", "IPC event handles")()

        @property
        def npu_event(self) -> int:
            return id(self._ev)

        @property
        def device(self) -> Any:
            return torch.device("npu", core.current_device())

        @property
        def event_id(self) -> int:
            return id(self._ev)

    def current(device_index: int = -1) -> tuple[int, int, int]:
        s = torch._C._accelerator_getStream(dm.index(None if device_index is None or device_index < 0 else device_index))
        return (s.stream_id, s.device_index, int(s.device_type))

    def default(device_index: int = -1) -> tuple[int, int, int]:
        idx = dm.index(None if device_index is None or device_index < 0 else device_index)
        return (0, idx, type_index)

    def set_stream(stream_id: int = 0, device_index: int = 0, device_type: int = 0) -> None:
        torch._C._accelerator_setStream(torch.Stream(stream_id=stream_id, device_index=device_index,
                                                     device_type=device_type or type_index))

    def raw(device_index: int = -1) -> int:
        return current(device_index)[0]

    return {"_NPUStreamBase": _NPUStreamBase, "_NPUEventBase": _NPUEventBase, "_npu_getCurrentStream": current,
            "_npu_getDefaultStream": default, "_npu_setStream": set_stream, "_npu_getCurrentRawStream": raw,
            "_npu_getCurrentRawStreamNoWait": raw}


class _Properties:
    """_NPUDeviceProperties (torch_npu/csrc/npu/Module.cpp): name, total_memory, cube/vector cores, L2."""

    def __init__(self, p: Any, index: int = 0) -> None:
        self.name = p.name
        self.total_memory = p.total_memory
        self.cube_core_num = p.cube_core_num
        self.vector_core_num = p.vector_core_num
        self.L2_cache_size = p.L2_cache_size
        # read by code written for CUDA (grid sizing, Inductor's heuristics) through torch.cuda aliases
        self.multi_processor_count = p.multi_processor_count
        self.major, self.minor = p.major, p.minor
        self.gcnArchName = p.gcnArchName
        self.uuid = _Uuid(index)

    def __repr__(self) -> str:
        return (f"_NPUDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"cube_core_num={self.cube_core_num}, vector_core_num={self.vector_core_num}, "
                f"L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)")


class _Uuid:
    """torch_npu._C._CUuuid (aclrtUuid): 16 bytes, shown in the 8-4-4-4-12 form; a simulated device's is
    derived from its index, the same in every process."""

    def __init__(self, index: int) -> None:
        import uuid

        self._uuid = uuid.uuid5(uuid.NAMESPACE_OID, f"cudashim simulated npu {index}")

    @property
    def bytes(self) -> list[int]:
        return list(self._uuid.bytes)

    def __str__(self) -> str:
        return str(self._uuid)


class _Memories:
    def __init__(self, free: int, total: int) -> None:
        self.free_memory, self.total_memory = free, total


def _submodule(name: str, doc: str, attrs: dict[str, Any]) -> types.ModuleType:
    mod = types.ModuleType(f"torch_npu._C.{name}", doc)
    for k, v in attrs.items():
        setattr(mod, k, v)
    for k, what in NEEDS_CANN.get(f"_C.{name}", {}).items():
        if not hasattr(mod, k):
            setattr(mod, k, _cann_required(f"_C.{name}.{k}", what))
    sys.modules[mod.__name__] = mod
    return mod


class _Singleton:
    _instance: Any = None

    @classmethod
    def GetInstance(cls) -> Any:  # noqa: N802 - torch_npu's name
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance


class _LogContext(_Singleton):
    """torch_npu's C++ log levels per module, set from torch._logging's state."""

    def __init__(self) -> None:
        self.levels: dict[str, int] = {}

    def setLogs(self, levels: dict[str, int]) -> None:  # noqa: N802
        self.levels = dict(levels)


class _FlopCountContext(_Singleton):
    """torch_npu's matmul FLOP counter (flopcount/FlopCountContext.cpp, its bindings in flopcount/Init.cpp:
    the counts are read-only recordedCount and traversedCount; reset also disables and resumes). It counts
    nothing on the simulated NPU: torch_npu counts in CANN's kernels, and the simulator's are the CPU's."""

    def __init__(self) -> None:
        self._enabled = False
        self._paused = False
        self._recorded = 0
        self._traversed = 0

    @property
    def recordedCount(self) -> int:  # noqa: N802 - torch_npu's binding's name
        return self._recorded

    @property
    def traversedCount(self) -> int:  # noqa: N802 - torch_npu's binding's name
        return self._traversed

    def enable(self) -> None:
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False

    def reset(self) -> None:
        self._enabled = self._paused = False
        self._recorded = self._traversed = 0


def _profiler_module(torch: Any) -> dict[str, Any]:
    class ProfilerActivity(enum.Enum):
        CPU = 0
        NPU = 1

    class NpuProfilerConfig:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.args, self.kwargs = args, kwargs

    class _ExperimentalConfig:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.args, self.kwargs = args, kwargs
            for k, v in kwargs.items():
                setattr(self, k, v)

    t0 = time.monotonic_ns()
    return {
        "ProfilerActivity": ProfilerActivity, "NpuProfilerConfig": NpuProfilerConfig,
        "_ExperimentalConfig": _ExperimentalConfig,
        "_supported_npu_activities": lambda: {ProfilerActivity.CPU, ProfilerActivity.NPU},
        "_get_freq": lambda: 100,
        "_get_syscnt_enable": lambda: False,
        "_get_syscnt": lambda: time.monotonic_ns() - t0,
        "_get_monotonic": time.monotonic_ns,
        "_get_host_uid": lambda: os.getuid() if hasattr(os, "getuid") else 0,
        "_enable_profiler_in_child_thread": lambda *a, **k: None,
        "_disable_profiler_in_child_thread": lambda *a, **k: None,
    }


def _cd_module(torch: Any) -> dict[str, Any]:
    class DType(enum.IntEnum):
        """torch_npu's custom dtypes (torch_npu/csrc/custom_dtype): exported as torch_npu.<name>."""

        float32 = 0
        float16 = 1
        int8 = 2
        int32 = 3
        uint8 = 4
        int16 = 6
        uint16 = 7
        uint32 = 8
        int64 = 9
        uint64 = 10
        float64 = 11
        bool = 12
        string = 13
        complex64 = 16
        complex128 = 17
        bfloat16 = 27
        int4 = 29
        uint1 = 30
        complex32 = 33
        hifloat8 = 34
        float8_e5m2 = 35
        float8_e4m3fn = 36
        float8_e8m0 = 37
        float6_e3m2 = 38
        float6_e2m3 = 39
        float4_e2m1 = 40
        float4_e1m2 = 41

    return {"DType": DType}


def _mstx_module() -> dict[str, Any]:
    ids = itertools.count(1)

    def mark(*args: Any, **kwargs: Any) -> None:
        return None

    def start(*args: Any, **kwargs: Any) -> int:
        return next(ids)

    def end(*args: Any, **kwargs: Any) -> None:
        return None

    return {"_mark": mark, "_mark_on_host": mark, "_range_push": start, "_range_push_on_host": start,
            "_range_pop": end, "_range_start": start, "_range_start_on_host": start, "_range_end": end}


# ---------------------------------------------------------------- the module


def build(torch: Any, core: Any) -> dict[str, Any]:
    """torch_npu._C's namespace: name -> value (submodules included, registered in sys.modules)."""
    from . import graphs, hccl
    from .module import NpuDeviceModule

    dm = NpuDeviceModule(torch, core)
    mem = dm.memory
    ns: dict[str, Any] = {}
    graphs._NEEDS_CANN[:] = [lambda qualname, what: CannRequired(
        f"torch_npu.{qualname} needs CANN ({what}), which the simulated NPU does not have; run this part on an NPU"
        + _pta())]
    ns.update(graphs.natives(torch, core))
    ns.update(_stream_classes(torch, core, dm))
    state: dict[str, Any] = {"options": {}, "deterministic": 0, "fill_uninit": False, "task_queue": 1,
                             "op_timeout_ms": 0, "train": True, "call_state": "forward", "fft_max": {},
                             "res_limit": {}, "history": False}
    settings_from_env(os.environ)
    _core_settings(core)

    def set_sync_debug_mode(mode: Any) -> None:
        """THNPModule_npu_set_sync_debug_mode: an int of 0, 1 or 2, else torch_npu's error."""
        if isinstance(mode, bool) or not isinstance(mode, int):
            raise RuntimeError("invalid argument to set_sync_debug_mode, debug_mode type must long"
                               + _pta("ERR00001", "invalid parameter"))
        if not 0 <= mode <= 2:
            raise RuntimeError("invalid value of debug_mode, expected one of 0,1,2" + _pta("ERR00003", "invalid value"))
        dm.set_sync_debug_mode(mode)

    def set_fft_capacity(size: int) -> None:
        if not 1 <= int(size) <= 99:
            raise RuntimeError("invalid value of cache_size, expected 1 to 99" + _pta("ERR00003", "invalid value"))
        state["fft_max"]["capacity"] = int(size)

    # devices
    ns.update({
        "_initExtension": lambda: _init_extension(torch, core),
        "_npu_init": lambda: _npu_init(core),
        "_npu_set_run_yet_variable_to_false": lambda: _run_yet.clear(),
        "_npu_getDeviceCount": lambda: int(core.device_count()),
        "_npu_getDevice": lambda: (_lazy_init(), int(core.current_device()))[1],
        "_npu_getDeviceWithoutSet": lambda: int(core.current_device()),
        "_npu_setDevice": lambda device: (_lazy_init(), dm.set_device(int(device)))[1],
        "_npu_maybeExchangeDevice": lambda device: dm.exchange_device(int(device)),
        # aclrtSynchronizeDevice: refused while a capture is open, as CANN's stream capture refuses it
        "_npu_synchronize": _no_args(graphs.refusing_synchronize(core, lambda device=None: None)),
        # aclrtDeviceCanAccessPeer: another device of the host, not the device itself
        "_npu_canDeviceAccessPeer": lambda device_id, peer_device_id: dm.index(device_id) != dm.index(peer_device_id),
        "_npu_getDeviceName": lambda: dm.get_device_name(),
        "_npu_getDeviceProperties": lambda device_id: _Properties(dm.get_device_properties(device_id),
                                                                  dm.index(device_id)),
        "_npu_getDeviceMemories": lambda device_id: _Memories(*_free_total(dm, core, device_id)),
        "_npu_getDeviceUtilizationRate": lambda device_id: {"cube": 0, "vector": 0, "aicpu": 0},
        "_npu_is_bf16_supported": lambda: True,
        "_npu_is_support_inf_nan": lambda: True,
        "_npu_is_jit_compile_false": lambda: True,
        "_npu_get_soc_version": lambda: SOC_VERSIONS[soc_name()],
        "_get_cann_version": cann_version,
        "_is_gte_cann_version": is_gte_cann_version,
        "_npu_shutdown": lambda *a: None,
        "_npu_shutdown_synchronize": lambda *a: None,
        "_npu_ipc_collect": lambda: None,
        "_npu_reset_thread_affinity": lambda *a: None,
        "_npu_set_thread_affinity": lambda *a: None,
        "_npu_lock_mutex": lambda: None,
        "_npu_unlock_mutex": lambda: None,
        # the device runs each stream's work as it is issued: no use of a block is pending on a stream
        "_npu_eraseStream": lambda tensor, stream_id=0, device_index=0, device_type=0: None,
    })

    def empty_strided_npu(*args: Any) -> Any:
        """THPModule_empty_strided_npu (torch_npu/csrc/InitNpuBindings.cpp): (sizes, strides, dtype) exactly."""
        if len(args) != 3:
            raise RuntimeError("_empty_strided_npu expects exactly 3 args: (sizes, strides, dtype)")
        sizes, strides, dtype = args
        if not isinstance(dtype, torch.dtype):
            raise RuntimeError("_empty_strided_npu: arg 3 must be a torch.dtype")
        return torch.empty_strided(tuple(sizes), tuple(strides), dtype=dtype,
                                   device=torch.device("npu", core.current_device()))

    ns["_empty_strided_npu"] = empty_strided_npu

    # options (NPUOptions / OptionsManager)
    def set_option(options: dict[str, str]) -> None:
        if not isinstance(options, dict):
            raise TypeError("npu option must be a dict." + _pta("ERR00001", "parameter error"))
        state["options"].update({str(k): str(v) for k, v in options.items()})

    def get_option(name: str) -> Any:
        v = state["options"].get(str(name))
        return None if v is None else v.encode()

    def set_task_queue(enable: int) -> None:
        state["task_queue"] = int(enable)

    ns.update({
        "_npu_setOption": set_option, "_npu_getOption": get_option,
        "_npu_set_deterministic_level": lambda level: state.__setitem__("deterministic", _unpack_uint32(level)),
        "_npu_get_deterministic_level": lambda: state["deterministic"],
        "_npu_set_sync_debug_mode": set_sync_debug_mode,
        "_npu_get_sync_debug_mode": lambda: dm.get_sync_debug_mode(),
        "_npu_set_task_queue_enable": set_task_queue,
        "_npu_get_task_queue_enable": lambda: state["task_queue"],
        "_npu_set_op_timeout_ms": lambda ms: state.__setitem__("op_timeout_ms", _unpack_uint32(ms)),
        "_npu_set_module_train_state": lambda mode: state.__setitem__("train", mode),
        "_npu_set_call_state": lambda mode: state.__setitem__("call_state", mode),
        "_npu_set_device_res_limit": lambda device, type, value: state["res_limit"].__setitem__((device, type), value),
        "_npu_get_device_res_limit": lambda device, type: state["res_limit"].get((device, type), 24 if type == 0 else 48),
        "_npu_set_stream_res_limit": lambda stream, type, value: state["res_limit"].__setitem__((stream, type), value),
        "_npu_get_stream_res_limit": lambda stream, type: state["res_limit"].get((stream, type), 24 if type == 0 else 48),
        "_npu_reset_stream_res_limit": lambda stream: None,
        # op-plugin's FFT plan cache (FFTCommonOpApi.cpp): one per process, of 10 plans unless set to 1..99
        "_npu_get_fft_plan_cache_max_size": lambda: state["fft_max"].get("capacity", 10),
        "_npu_set_fft_plan_cache_max_size": set_fft_capacity,
        "_npu_get_fft_plan_cache_size": lambda: 0,
        "_npu_clear_fft_plan_cache": lambda: None,
        "_get_npu_data_unsafe_flag": lambda: False,
        "_set_npu_data_unsafe_flag": lambda flag: None,
        "_mark_all_npu_data_ptr_unsafe": lambda *a: None,
        "_check_npu_data_ptr": lambda *a: None,
        "_update_npu_data_ptr": lambda *a: None,
        "_set_storage_access_error_msg": lambda tensor, msg: core.set_storage_access_error_msg(tensor, msg),
        "_set_storage_data_ptr_access_error_msg": lambda tensor, msg: core.set_storage_data_ptr_access_error_msg(tensor, msg),
        "_free_And_Remove_DeleterFn": lambda ptr: core.free_and_remove_deleter(ptr),
        "_has_Standard_Deleter": lambda ptr: core.has_standard_deleter(ptr),
    })

    # memory
    def set_fraction(fraction: float, device: int) -> None:
        dm.index(device)
        core.set_memory_fraction(int(device), float(fraction))

    def set_settings(conf: str) -> None:
        _SETTINGS.update(parse_allocator_settings(conf, RUNTIME_SETTINGS))
        _core_settings(core)

    def unpack(device: Any) -> int:
        """THPUtils_unpackDeviceIndex: an int8 device index, -1 for the current one."""
        i = int(device)
        if not -128 <= i <= 127:
            raise RuntimeError("Overflow when unpacking DeviceIndex")
        return dm.index(i)

    ns.update({
        "_npu_memoryStats": lambda device: dict(mem.nested(unpack(device)),
                                                num_oom_rejections=int(core.oom_rejections(unpack(device)))),
        "_npu_resetAccumulatedMemoryStats": lambda device: (mem.reset_accumulated_memory_stats(unpack(device)),
                                                            core.reset_oom_rejections(unpack(device)))[0],
        "_npu_resetPeakMemoryStats": lambda device: mem.reset_peak_memory_stats(unpack(device)),
        "_npu_emptyCache": lambda *a: mem.empty_cache(),
        "_npu_emptyVirtAddrCache": lambda *a: None,
        "_npu_memorySnapshot": lambda *a, **k: {"segments": mem.segments(), "device_traces": [[] for _ in range(int(core.device_count()))]},
        "_npu_setMemoryFraction": set_fraction,
        "_npu_getMemoryFraction": lambda device: float(core.memory_fraction(int(device))),
        # raw_alloc_with_stream: on the current device (the stream orders the block's reuse, which the
        # simulated device, running each call as issued, has no need of)
        "_npu_npuCachingAllocator_raw_alloc": lambda size, stream: int(core.raw_alloc(int(size), int(core.current_device()))),
        "_npu_npuCachingAllocator_raw_delete": lambda ptr: core.raw_delete(int(ptr)),
        "_npu_npuCachingAllocator_set_allocator_settings": set_settings,
        "_npu_getAllocatorBackend": lambda: "native",
        "_npu_hostMemoryStats": lambda: _host_stats(core),
        "_npu_resetPeakHostMemoryStats": lambda: None,
        "_npu_resetAccumulatedHostMemoryStats": lambda: None,
        "_npu_hostEmptyCache": lambda: core.empty_host_cache(),
        "_npu_record_memory_history": lambda *a, **k: state.__setitem__("history", bool(a and a[0])),
        "_npu_isHistoryEnabled": lambda: state["history"],
        "_npu_saveDevMemUsageInfo": lambda *a: None,
        "_npu_beginAllocateCurrentThreadToPool": lambda device, pool: core.pool_begin_thread(int(device), tuple(pool)),
        "_npu_endAllocateToPool": lambda device, pool: core.pool_end_thread(int(device), tuple(pool)),
        "_npu_releasePool": lambda device, pool: core.pool_release(int(device), tuple(pool)),
        "_npu_checkPoolLiveAllocations": lambda device, pool, ptrs: set(core.pool_allocated(int(device), tuple(pool))) == set(ptrs),
        "_npu_getCheckpointState": lambda device, pool: _cann_required("_C._npu_getCheckpointState", "allocator checkpoints")(),
        "_npu_setCheckpointPoolState": lambda *a: _cann_required("_C._npu_setCheckpointPoolState", "allocator checkpoints")(),
        "_add_cached_tensor": torch._C._add_cached_tensor,
        "_remove_cached_tensor": torch._C._remove_cached_tensor,
        "_set_cached_tensors_enabled": torch._C._set_cached_tensors_enabled,
        "_tensors_data_ptrs_at_indices_equal": lambda tensors, data_ptrs, indices: all(
            tensors[i].data_ptr() == data_ptrs[i] for i in indices),
    })

    class _npu_NPUAllocator:  # noqa: N801 - torch_npu's name
        """The allocator object torch_npu hands out (_npu_getAllocator)."""

    class _npu_NPUAllocator_AllocatorState:  # noqa: N801
        pass

    class _MemPool:
        """c10_npu::MemPool (torch_npu/csrc/npu/MemPool.cpp): a private pool with its id."""

        _ids = itertools.count(1)

        def __init__(self, allocator: Any = None, is_user_created: bool = True, use_on_oom: bool = False) -> None:
            _lazy_init()  # as its constructor: the runtime is started before a pool is made
            self.id = (0, next(self._ids)) if is_user_created else (next(self._ids), 0)
            self.allocator = allocator
            self._use_on_oom = use_on_oom

        def use_count(self) -> int:
            return 1

    ns.update({"_npu_NPUAllocator": _npu_NPUAllocator, "_npu_NPUAllocator_AllocatorState": _npu_NPUAllocator_AllocatorState,
               "_MemPool": _MemPool, "_npu_getAllocator": lambda: _npu_NPUAllocator()})

    # autocast (torch_npu/csrc/npu/Module.cpp binds torch's own for npu)
    ns.update({
        "is_autocast_enabled": lambda: torch.is_autocast_enabled("npu"),
        "set_autocast_enabled": lambda enabled: torch.set_autocast_enabled("npu", enabled),
        "get_autocast_dtype": lambda: torch.get_autocast_dtype("npu"),
        "set_autocast_dtype": lambda dtype: torch.set_autocast_dtype("npu", dtype),
    })

    class _VariableFunctionsClass:
        """torch_npu's generated functions: the NPU operators, as torch.ops.npu has them."""

        def __getattr__(self, name: str) -> Any:  # pragma: no cover - class-level access below
            return getattr(torch.ops.npu, name)

    class _VFMeta(type):
        def __getattr__(cls, name: str) -> Any:
            return getattr(torch.ops.npu, name)

    ns["_VariableFunctionsClass"] = _VFMeta("_VariableFunctionsClass", (), {})

    class ShapePolicy(enum.IntEnum):
        NONE = 0
        PAD = 1

    class ShapeType(enum.IntEnum):
        STATIC = 0
        DYNAMIC = 1

    class _NPUShapeHandling:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.args, self.kwargs = args, kwargs

    ns["_NPUDeviceProperties"] = _Properties
    ns.update({"ShapePolicy": ShapePolicy, "ShapeType": ShapeType, "_NPUShapeHandling": _NPUShapeHandling})

    # the children torch_npu creates at start-up (module_loader.py's _initialize_c_extension_children)
    children = {
        "_profiler": _submodule("_profiler", "torch_npu's profiler natives (host side only)", _profiler_module(torch)),
        "_cd": _submodule("_cd", "torch_npu's custom dtypes", _cd_module(torch)),
        "_logging": _submodule("_logging", "torch_npu's C++ log levels", {"_LogContext": _LogContext}),
        "_flops_count": _submodule("_flops_count", "torch_npu's FLOP counter", {"_FlopCountContext": _FlopCountContext}),
        "_distributed_c10d": _submodule("_distributed_c10d", "ProcessGroupHCCL: the simulated HCCL group (Gloo underneath)",
                                        {"ProcessGroupHCCL": hccl.ProcessGroupHCCL,
                                         "_is_support_hccl_comm_name": lambda: True,
                                         "_verify_params_across_processes": lambda *a, **k: None}),
        "_npurt": _submodule("_npurt", "torch_npu's runtime API (the simulated device answers)", _npurt(torch, core)),
        "_mstx": _submodule("_mstx", "torch_npu's mstx markers: recorded nowhere on the simulated NPU", _mstx_module()),
    }
    ns.update(children)
    for init in ("_profiler_init", "_c10d_npu_init", "_cd_init", "_logging_init", "_flops_count_init", "_npurt_init"):
        ns[init] = lambda: None

    ns.update(_native_semantics(torch, core, dm, ns["_NPUEventBase"]))
    for name, what in NEEDS_CANN["_C"].items():
        ns.setdefault(name, _cann_required(f"_C.{name}", what))
    return ns


# ---------------------------------------------------------------- native semantics kept in the core


#: sizeof(aclrtIpcEventHandle): the bytes an event's IPC handle has
IPC_EVENT_HANDLE_SIZE = 64
_IPC_MAGIC = b"cudashim-npu-ipc-event\0"


def _ipc_events(torch: Any, core: Any, event_base: type) -> None:
    """Interprocess events (THNPEvent's interprocess flag, ipc_handle, from_ipc_handle; NPUEvent.cpp).
    The simulated device runs each call as it is issued, so an event recorded in one process has
    completed before any other process can hold its handle: an event opened from a handle is an event
    of the device named, complete until recorded, as the exporter's is. The handle carries the
    exporter's process and event, in aclrtIpcEventHandle's size."""
    plain_new = event_base.__new__

    def __new__(cls: Any, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                graph_external: bool = False, **kwargs: Any) -> Any:
        if interprocess and (enable_timing or graph_external):
            # ACL_EVENT_IPC cannot be combined with another flag (THNPEvent_pynew)
            raise RuntimeError("Parameter interprocess cannot be specified together with other parameters."
                               + _pta("ERR00007", "feature not supported"))
        self = plain_new(cls, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess,
                         graph_external=graph_external, **kwargs)
        self._interprocess = bool(interprocess)
        self._ipc_device = None
        return self

    def ipc_handle(self: Any) -> bytes:
        if self._ipc_device is None:  # created on the current stream's device, as NPUEvent::ipc_handle does
            self._ipc_device = int(core.current_device())
        body = _IPC_MAGIC + int(os.getpid()).to_bytes(8, "little") + id(self).to_bytes(8, "little") + \
            int(self._ipc_device).to_bytes(2, "little")
        return body.ljust(IPC_EVENT_HANDLE_SIZE, b"\0")

    def from_ipc_handle(cls: Any, device: Any, handle: Any) -> Any:
        dev = torch.device("npu", device) if isinstance(device, int) else torch.device(device)
        data = bytes(handle) if not isinstance(handle, str) else handle.encode("latin-1")
        if len(data) != IPC_EVENT_HANDLE_SIZE:
            raise RuntimeError(f"aclrtIpcEventHandle expects byte-like object of size {IPC_EVENT_HANDLE_SIZE}, but got "
                               f"{len(data)}" + _pta("ERR00001", "parameter error"))
        if dev.type != "npu":
            raise RuntimeError(f"Event can only be created on PrivateUse1 devices, but got device type {dev.type}"
                               + _pta("ERR00001", "parameter error"))
        if not data.startswith(_IPC_MAGIC):
            raise RuntimeError("aclrtIpcOpenEventHandle: the handle is no event's handle exported by the simulated NPU"
                               + _pta("ERR00001", "parameter error"))
        self = cls.__new__(cls, interprocess=True)
        self._ipc_device = dev.index if dev.index is not None else int(core.current_device())
        return self

    def device(self: Any) -> Any:
        index = self._ipc_device if getattr(self, "_ipc_device", None) is not None else int(core.current_device())
        return torch.device("npu", index)

    event_base.__new__ = __new__  # type: ignore[method-assign]
    event_base.ipc_handle = ipc_handle  # type: ignore[attr-defined]
    event_base.from_ipc_handle = classmethod(from_ipc_handle)  # type: ignore[attr-defined]
    event_base.device = property(device)  # type: ignore[attr-defined]


def _native_semantics(torch: Any, core: Any, dm: Any, event_base: type) -> dict[str, Any]:
    """What torch_npu's C++ does below its Python bindings, done by the simulated device's core:

    * its caching allocator is a c10::DeviceAllocator, so torch.accelerator's memory functions
      (memory_stats, get_memory_info, ...) reach it; the core's device allocator is one too
      (csrc/runtime/allocator.cpp), its statistics those torch.npu reports, and get_memory_info asks
      the same source as torch.npu.mem_get_info (aclrtGetMemInfo);
    * its empty tensors are filled under torch.use_deterministic_algorithms(True) when both torch's
      fill_uninitialized_memory and torch_npu's own switch (turned by the wheel's setter of the former)
      are on (should_fill_empty_deterministic, TensorFactories.cpp): the switch lives in the core,
      which makes the tensors;
    * interprocess events (_ipc_events).
    """
    core.set_memory_info(lambda device: _free_total(dm, core, int(device)))
    _ipc_events(torch, core, event_base)
    return {
        "_npu_set_fill_uninitialized_memory": lambda flag: core.set_npu_fill_uninitialized_memory(bool(flag)),
        "_npu_get_fill_uninitialized_memory": lambda: bool(core.npu_fill_uninitialized_memory()),
    }


def settings_from_env(environ: Any) -> None:
    """PYTORCH_NPU_ALLOC_CONF (or PYTORCH_ALLOC_CONF) read once at start-up, as NPUAllocatorConfig::instance does."""
    npu, acc = environ.get("PYTORCH_NPU_ALLOC_CONF"), environ.get("PYTORCH_ALLOC_CONF")
    if npu is not None and acc is not None:
        raise RuntimeError("Both PYTORCH_NPU_ALLOC_CONF and PYTORCH_ALLOC_CONF have been set, please set only one of them."
                           + _pta("ERR01001", "invalid value"))
    conf = npu if npu is not None else acc
    if conf:
        _SETTINGS.update(parse_allocator_settings(conf))


def _core_settings(core: Any) -> None:
    """The settings the core applies itself: the caching host allocator's thresholds from the settings in force (c10's pinned_max_round_threshold
    and pinned_max_cached_size, which torch_npu's allocator reads through NPUAllocatorConfig; unset: no
    limit); with pin_memory_expandable_segments they do not apply, and torch_npu warns once that they do not."""
    unset = 2**63 - 1
    mb = {k: int(_SETTINGS[k]) * 2**20 if k in _SETTINGS else unset
          for k in ("pinned_max_round_threshold_mb", "pinned_max_cached_size_mb")}
    if _SETTINGS.get("pin_memory_expandable_segments") == "True" and min(mb.values()) != unset:
        if not _WARNED_EXPANDABLE_HOST:
            _WARNED_EXPANDABLE_HOST.append(True)
            import warnings

            warnings.warn("`pinned_max_round_threshold_mb` and `pinned_max_cached_size_mb` do not take effect "
                          "when `pin_memory_expandable_segments` is enabled. To use these options, set "
                          "`pin_memory_expandable_segments` to `False`.", stacklevel=2)
    core.set_host_thresholds(mb["pinned_max_round_threshold_mb"], mb["pinned_max_cached_size_mb"])
    # throw_on_npumalloc_oom: a new block past per_process_memory_fraction of the device is refused up front
    throw = _SETTINGS.get("throw_on_npumalloc_oom") == "True"
    core.set_oom_rejection(float(_SETTINGS.get("per_process_memory_fraction", "1.0")) if throw else -1.0)


_WARNED_EXPANDABLE_HOST: list[bool] = []


def _unpack_uint32(obj: Any) -> int:
    """torch's THPUtils_unpackUInt32, as the bindings that take an unsigned int read their argument."""
    if not isinstance(obj, int):
        raise TypeError(f"an integer is required (got type {type(obj).__name__})")
    if obj < 0:
        raise OverflowError("can't convert negative value to unsigned int")
    if obj > 2**32 - 1:
        raise ValueError("Overflow when unpacking long long")
    return int(obj)


def _no_args(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda: fn()


def _free_total(dm: Any, core: Any, device_id: int) -> tuple[int, int]:
    """aclrtGetMemInfo: a profiled device's own memory less what it reserves; else the host's."""
    dm.index(device_id)
    if core.model_active():
        return dm.memory.capacity_mem_get_info(device_id)
    free, total = dm._mem_get_info(device_id)
    return int(free), int(total)


def _host_stats(core: Any) -> dict[str, Any]:
    s = core.host_stats()
    out: dict[str, Any] = {}
    for k, v in dict(s).items():
        out[k] = v
    return out


_LIBS: list[Any] = []
#: called with torch at the end of _initExtension (the simulated torch_npu's _C adds the readiness report)
AFTER_INIT: list[Callable[[Any], None]] = []


def register_operators(torch: Any, core: Any, site: Any) -> None:
    """What loading torch_npu's native module registers beyond _C's names: torch_npu's own operators
    under torch.ops.npu, with the schemas the wheel lists (torch_npu/csrc/aten/
    npu_native_functions_by_codegen.yaml, its `custom` section); from there the wheel's _exports.py
    exposes them as torch_npu.<op>. The operators the simulator computes (cudashim/emulated/npu/ops.py)
    are its CPU implementations; every other one, called on npu tensors, raises torch_npu's error
    saying it needs CANN's kernel."""
    import yaml

    from . import expose, ops

    simulated = expose.exposed_operators(torch, core, ops.OPERATORS)
    listing = yaml.safe_load((site / "torch_npu" / "csrc" / "aten" / "npu_native_functions_by_codegen.yaml").read_text())
    lib = torch.library.Library("npu", "DEF")
    _LIBS.append(lib)
    names: dict[str, tuple[str, ...]] = {}
    for entry in listing.get("custom", []):
        schema = entry["func"]
        name = schema.split("(", 1)[0]
        lib.define(schema)
        names[name] = _dispatch_keys(entry)
    for name, keys in sorted(names.items()):
        base, _, overload = name.partition(".")
        for key in keys:
            if base in simulated and not overload:
                lib.impl(name, _adapter(torch, name, simulated[base]), key)
            else:
                lib.impl(name, _cann_kernel(name), key)


def _dispatch_keys(entry: dict[str, Any]) -> tuple[str, ...]:
    """The dispatch keys torch_npu's codegen registers an operator of the listing under: the NPU's own
    (PrivateUse1) unless the entry names others (`dispatch:`), as an operator without a tensor argument
    (npu_dropout_gen_mask, empty_with_format) does: the dispatcher finds no device key in its
    arguments, so only a CompositeExplicitAutograd kernel reaches it."""
    named = tuple(entry.get("dispatch") or ())
    return named or ("PrivateUse1",)


def _adapter(torch: Any, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """The simulator's CPU implementation as the kernel of torch_npu's schema: arguments by name; an
    argument of the schema the implementation does not take must keep its default."""
    import inspect

    from ...errors import CapabilityError

    schema = getattr(torch.ops.npu, name).default._schema
    takes = set(inspect.signature(fn).parameters)
    args = schema.arguments

    def kernel(*pos: Any, **kw: Any) -> Any:
        values = dict(zip((a.name for a in args), pos))
        values.update(kw)
        call = {}
        for a in args:
            if a.name not in values:
                continue
            v = values[a.name]
            if a.name in takes:
                call[a.name] = v
            elif a.has_default_value() and v != a.default_value:
                raise CapabilityError(f"torch_npu.{name}({a.name}={v!r}) is not simulated (only its default "
                                      f"{a.default_value!r}); run this part on an NPU")
        return fn(**call)

    return kernel


def _cann_kernel(name: str) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise CannRequired(f"torch_npu.{name.split('.', 1)[0]}: the NPU kernel of npu::{name} is CANN's; the simulated "
                           "NPU computes only the operators listed in docs/testing-an-ascend-port.md" + _pta())

    return kernel


def _tensor_types(torch: Any) -> dict[str, type]:
    """torch.npu.FloatTensor & co. (torch_npu/csrc/utils/TensorType.cpp, added at _initExtension): as
    torch's legacy types, isinstance() holds for a strided npu tensor of the dtype; calling one makes
    an npu tensor from data or sizes."""
    dtypes = {c.__name__: c.dtype for c in torch._tensor_classes if c.__module__ == "torch"}

    class _LegacyType(type):
        def __instancecheck__(cls, obj: Any) -> bool:
            return (isinstance(obj, torch.Tensor) and obj.device.type == "npu" and obj.dtype == cls.dtype
                    and obj.layout == torch.strided)

    def make(name: str, dtype: Any) -> type:
        def __new__(cls: Any, *args: Any, device: Any = None) -> Any:
            dev = torch.device("npu") if device is None else torch.device(device)
            if len(args) == 1 and not isinstance(args[0], (int, torch.Size)):
                data = args[0]
                if isinstance(data, torch.Tensor):
                    return data.to(device=dev, dtype=dtype)
                return torch.tensor(data, dtype=dtype, device=dev)
            return torch.empty(*(args or (0,)), dtype=dtype, device=dev)

        return _LegacyType(name, (), {"__new__": __new__, "dtype": dtype, "is_sparse": False, "is_cuda": False,
                                      "__module__": "torch.npu"})

    return {n: make(n, d) for n, d in dtypes.items()}


def _init_extension(torch: Any, core: Any) -> None:
    """THNPModule_initExtension: the last step of `import torch_npu`, once torch.npu is registered —
    here torch.compile's npu backend, the HCCL groups, then AFTER_INIT."""
    from . import compile as compile_

    npu = sys.modules["torch_npu.npu"]
    for name, cls in _tensor_types(torch).items():
        setattr(npu, name, cls)
    compile_.register(torch)
    # torch_npu's own Inductor backend (torch_npu/_inductor) generates Triton-Ascend kernels, which need
    # an NPU; the simulated NPU compiles npu graphs with Inductor's C++ code generator (compile.py), so
    # torch_npu's registration is switched off through its own switch
    from torch_npu.utils._dynamo import disable_register_inductor_npu

    disable_register_inductor_npu()
    import torch.distributed as dist

    from . import hccl

    # after torch_npu's own patches of c10d (its _compat replaces _new_process_group_helper), so the
    # simulated groups' wrapper sits outside them
    hccl.register(torch, core, backend=False)
    if dist.is_available() and "hccl" in dist.Backend.backend_capability:
        # torch_npu registered "hccl" for npu; the simulated group is Gloo's, whose npu collectives the
        # core hands over as cpu tensors of the same memory: the group needs its cpu side too
        dist.Backend.backend_capability["hccl"] = ["npu", "cpu"]
    # the runtime itself is not started here: as with torch_npu, the first use of the device does it
    # (torch.npu._lazy_init, called by torch's factory functions and Tensor.to, and by the calls of _C
    # that torch_npu's C++ starts it from: _lazy_init below)
    for hook in AFTER_INIT:
        hook(torch)


#: torch_npu's npu_run_yet (torch_npu/csrc/utils/LazyInit.cpp): set once the Python side initialized;
#: cleared in a forked child (_npu_set_run_yet_variable_to_false)
_run_yet: set[bool] = set()


def _lazy_init() -> None:
    """torch_npu::utils::npu_lazy_init: torch_npu.npu._lazy_init, once per process, called where its C++
    calls it among the names here (setting or reading the current device, a new memory pool); torch's
    factory functions and Tensor.to call torch.npu._lazy_init themselves."""
    if not _run_yet:
        sys.modules["torch_npu.npu"]._lazy_init()
        _run_yet.add(True)


def _npu_init(core: Any) -> None:
    """THNPModule_initExtension, torch_npu._C._npu_init (torch_npu/csrc/npu/Module.cpp): what
    torch.npu._lazy_init starts, once: the device runtime (the core serves it from the start) and
    torch_npu.npu.default_generators, one per device."""
    npu = sys.modules["torch_npu.npu"]
    npu.default_generators = tuple(core.default_generator(i) for i in range(int(core.device_count())))


def trace_if_asked(module: Any, names: set[str]) -> None:
    """With CUDASHIM_TRACE_NATIVES=<file>, every name read on torch_npu._C and its children is recorded
    and written there as JSON at exit (scripts/npu_natives.py's import-time tracing). On _C itself only
    its native names (`names`) and names it lacks count: the wheel walks dir(_C), which also lists the
    stand-in module's own imports."""
    out = os.environ.get("CUDASHIM_TRACE_NATIVES")
    if not out:
        return
    import atexit
    import json

    seen: dict[str, set[str]] = {}

    def watch(mod: types.ModuleType, key: str) -> None:
        class Watched(types.ModuleType):
            def __getattribute__(self, name: str) -> Any:
                if not name.startswith("__") and (key != "_C" or name in names or name not in vars(module)):
                    seen.setdefault(key, set()).add(name)
                return super().__getattribute__(name)

        mod.__class__ = Watched

    watch(module, "_C")
    for name, value in list(vars(module).items()):
        if isinstance(value, types.ModuleType) and value.__name__.startswith("torch_npu._C."):
            watch(value, f"_C.{name}")
    atexit.register(lambda: open(out, "w").write(json.dumps({k: sorted(v) for k, v in seen.items()})))
