"""NCCL on the emulated cuda device: process groups of backend "nccl" are Gloo groups that answer as
NCCL groups.

A CPU build of torch has no ProcessGroupNCCL, so every group a program asks NCCL for is created
with Gloo (whose collectives the core runs on cuda tensors, distributed.py). What the program can
observe of the group is what a GPU answers, so code written for NCCL takes its NCCL branch:

* get_backend() is the name the program gave ("nccl", "cpu:gloo,cuda:nccl"; "undefined" when it gave
  none, as on a GPU), get_backend_config() says "cuda:nccl", ProcessGroup.name() says "nccl"
  (the group also takes CPU tensors, which a GPU's NCCL-only group refuses: the core's collectives
  reach Gloo through the group's cpu backend);
* init_process_group() with no backend (or with device_id only) picks the accelerator's default,
  "nccl", and gets a Gloo group instead of "Distributed package doesn't have NCCL built in";
* dist.is_nccl_available() is True; dist.ProcessGroupNCCL.Options() (pg_options) is accepted: its
  fields tune NCCL communicators (CTAs, stream priority, splitting) and mean nothing to Gloo;
* torch.cuda.nccl.version() answers NCCL_VERSION (torch's profiler and c10d's logger ask it of any
  "nccl" group).

The truth stays where a lie would make a program do what cannot work: the backend object under the
name, pg._get_backend(torch.device("cuda")), is Gloo's (not an instance of dist.ProcessGroupNCCL;
its NCCL-only methods, comm_split_count and the like, raise CapabilityError); c10d's own module still says NCCL is absent, so torch's internals never
reach for NCCL-only C++ APIs; constructing dist.ProcessGroupNCCL directly and torch.cuda.nccl's
collectives (which call NCCL's C API) raise CapabilityError naming the way out.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NoReturn

from ..errors import CapabilityError
from .distributed import named_groups

__all__ = ["bind", "NCCL_VERSION", "ProcessGroupNCCL"]

# What torch.cuda.nccl.version() answers: the NCCL release a CUDA 13 build of torch 2.11 reports
# (checked there; torch 2.13's CUDA wheels were not available to check). No NCCL is loaded; the number is there for code that logs it or gates NCCL features on it, and every such
# feature it can reach (ProcessGroupNCCL options) is a tuning Gloo ignores.
NCCL_VERSION = (2, 28, 9)

# ProcessGroupNCCL's default timeout (kProcessGroupNCCLDefaultTimeout); a CPU build has none, and
# init_process_group("nccl") would warn and use Gloo's 30 minutes
_NCCL_TIMEOUT = timedelta(minutes=10)

_WAY_OUT = ("create the group with torch.distributed.init_process_group(\"nccl\") or new_group(backend=\"nccl\") "
            "(Gloo underneath on the emulated device) and use torch.distributed's collectives")


# ProcessGroupNCCL's own methods and properties (torch/_C/_distributed_c10d.pyi). Asked of the Gloo
# backend under an "nccl" group they raise an error that is a CapabilityError and an AttributeError,
# so hasattr() probes (torch's split_group asks for comm_split_count) still say False.
_NCCL_ONLY = frozenset({
    "comm_split_count", "perform_nocolor_split", "_group_start", "_group_end", "_start_time_estimate",
    "_end_time_estimate", "_add_ephemeral_timeout", "_verify_work_timeout", "register_mem_pool",
    "deregister_mem_pool", "_is_initialized", "uid", "_shutdown", "get_build_nccl_version", "get_runtime_nccl_version",
})


class _NCCLOnlyAttribute(CapabilityError, AttributeError):
    """A ProcessGroupNCCL-only attribute asked of the Gloo backend that serves an "nccl" group."""


def _gloo_getattr(self: Any, attr: str) -> Any:
    if attr in _NCCL_ONLY:
        raise _NCCLOnlyAttribute(
            f"{type(self).__name__}.{attr} is ProcessGroupNCCL's, not available on cpu: an \"nccl\" group's backend "
            "(pg._get_backend(torch.device(\"cuda\"))) is Gloo's on the emulated cuda device, with no NCCL "
            "communicator (capability 'collective_backend'); skip NCCL-only calls when the backend is not an "
            "instance of torch.distributed.ProcessGroupNCCL, and use torch.distributed's collectives")
    raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")


def _refuse(api: str) -> NoReturn:
    raise CapabilityError(f"{api} is not available on cpu: the emulated cuda device has no NCCL library "
                          f"(capability 'collective_backend'); {_WAY_OUT}")


class _NCCLConfig:
    """ncclConfig_t's fields as ProcessGroupNCCL.NCCLConfig exposes them (NCCL_CONFIG_UNDEF_INT = unset)."""

    def __init__(self) -> None:
        undef = -(2 ** 31)
        self.blocking = self.cga_cluster_size = self.min_ctas = self.max_ctas = undef
        self.split_share = self.cta_policy = undef
        self.net_name: str | None = None


def _options_class() -> type:
    import torch._C._distributed_c10d as c10d

    class Options(c10d.Backend.Options):  # a Backend.Options as on a GPU: backend "nccl", _timeout
        """ProcessGroupNCCL.Options: accepted as pg_options; Gloo, which serves the group, ignores them."""

        def __init__(self, is_high_priority_stream: bool = False) -> None:
            super().__init__("nccl")
            self.is_high_priority_stream = is_high_priority_stream
            self.config = _NCCLConfig()
            self.split_from: Any = None
            self.split_color = 0
            self.global_ranks_in_group: list[int] = []
            self.group_name = ""

    Options.__qualname__ = "ProcessGroupNCCL.Options"
    return Options


class ProcessGroupNCCL:
    """torch.distributed.ProcessGroupNCCL's name on the emulated device: its Options and constants.

    Groups are made by init_process_group / new_group; a ProcessGroupNCCL backend object cannot be
    (there is no NCCL), so construction raises CapabilityError. isinstance(x, ProcessGroupNCCL) is
    False for every backend, Gloo's included: code that checks before calling NCCL-only methods
    takes its generic path.
    """

    NCCLConfig = _NCCLConfig
    Options: type = object  # set by bind(): a Backend.Options subclass needs torch
    NCCL_CTA_POLICY_DEFAULT, NCCL_CTA_POLICY_EFFICIENCY, NCCL_CTA_POLICY_ZERO = 0, 1, 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse("torch.distributed.ProcessGroupNCCL(store, rank, size, options)")


def _true(*args: Any, **kwargs: Any) -> bool:
    return True


def _version() -> tuple[int, int, int]:
    return NCCL_VERSION


def bind(b: Any, torch: Any) -> None:
    """Register the NCCL bindings into b (restorable)."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    import torch.cuda.nccl as nccl

    c10d = dist.distributed_c10d
    ProcessGroupNCCL.Options = _options_class()
    helper = named_groups(c10d, torch, c10d._new_process_group_helper, name="nccl", device="cuda", made_as="gloo",
                          backend_type=c10d.ProcessGroup.BackendType.NCCL)
    b.bind(c10d, "_new_process_group_helper", helper, "torch.distributed.init_process_group", "aliased")
    # Only the public names: torch's own c10d code reads its module globals (_NCCL_AVAILABLE,
    # ProcessGroupNCCL), which must keep saying there is no NCCL C++ backend to reach for.
    b.bind(dist, "is_nccl_available", _true, "torch.distributed.is_nccl_available", "aliased")
    b.bind(dist, "ProcessGroupNCCL", ProcessGroupNCCL)
    if hasattr(dist, "ProcessGroupGloo"):
        b.bind(dist.ProcessGroupGloo, "__getattr__", _gloo_getattr)  # only reached for names Gloo lacks
    for mod in (c10d, dist.constants):
        b.bind(mod, "default_pg_nccl_timeout", _NCCL_TIMEOUT)
    b.bind(nccl, "version", _version, "torch.cuda.nccl.version", "aliased")
    for name in ("all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter", "unique_id", "init_rank"):
        def refuse(*args: Any, _api: str = f"torch.cuda.nccl.{name}", **kwargs: Any) -> NoReturn:
            _refuse(_api)

        refuse.__name__ = name
        b.bind(nccl, name, refuse, f"torch.cuda.nccl.{name}", "unsupported")
