"""Every environment variable the shim reads or sets, typed, in one place.

READ lists the variables the shim reads (its own CUDASHIM_* and the foreign ones it interprets).
PLATFORM_ENV is the table of variables the bootstrap sets per platform, before torch is imported;
`cudashim doctor` prints it. Both are written below as plain rows and become records on first use. apply_platform_env() applies it to an environ and returns what it
changed, so a bootstrap that fails later can undo it (undo()).
Reading never imports torch.
"""

import os

# typing and dataclasses stay out of the bootstrap's import path: every shimmed interpreter imports
# this module before user code, and dataclasses alone pulls in inspect, ast, dis and tokenize. So do
# `from __future__ import annotations` and cudashim.errors (each one more import): annotations that
# name typing's names are strings, and EnvError is imported where it is raised.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable, Mapping, MutableMapping

__all__ = [
    "Var",
    "READ",
    "CPU_DEVICES_MAX",
    "home_folder",
    "get",
    "raw",
    "EnvRule",
    "PLATFORM_ENV",
    "NPU_ALLOC_KEYS",
    "CUDA_TO_NPU_ALLOC_KEYS",
    "Change",
    "translate_alloc_conf",
    "apply_platform_env",
    "undo",
]


# A small immutable record: what `@dataclass(frozen=True)` gives, without importing dataclasses
# (which alone pulls in inspect, ast, dis and tokenize). It lives here rather than in a module of its
# own because this is the first module on the bootstrap path that needs it (Var, EnvRule) and one
# module fewer to import is start-up time saved in every shimmed process; hardware.nvidia and config use it as Record.
# A subclass names its fields in `__slots__` and optional defaults in `_defaults`; it gets
# positional/keyword construction with dataclass-style TypeErrors, equality and hashing by value
# (same class only), a dataclass-style repr, `_replace()`, and pickling/copying.
class _Record:
    __slots__: tuple[str, ...] = ()
    _defaults: dict[str, object] = {}

    def __init__(self, *args: object, **kwargs: object) -> None:
        names = self.__slots__
        if not kwargs and len(args) == len(names):  # the common case, kept cheap (tables at import)
            for name, value in zip(names, args):
                object.__setattr__(self, name, value)
            return
        cls = type(self).__name__
        if len(args) > len(names):
            raise TypeError(f"{cls}() takes {len(names)} arguments but {len(args)} were given")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{cls}() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{cls}() got multiple values for argument {key!r}")
            values[key] = value
        defaults = self._defaults
        for name in names:
            if name in values:
                value = values[name]
            elif name in defaults:
                value = defaults[name]
            else:
                raise TypeError(f"{cls}() missing required argument: {name!r}")
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use _replace()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _astuple(self) -> tuple[object, ...]:
        return tuple(getattr(self, n) for n in self.__slots__)

    def _replace(self, **changes: object) -> "_Record":
        """A copy with `changes` applied (dataclasses.replace)."""
        values = dict(zip(self.__slots__, self._astuple()))
        values.update(changes)
        return type(self)(**values)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return other._astuple() == self._astuple()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__slots__)})"

    def __reduce__(self) -> tuple[object, ...]:
        # slots plus a refusing __setattr__ would break pickle's default state restore (and copy)
        return (type(self), self._astuple())


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("", "0", "false", "no", "off"):
        return False
    from .errors import EnvError

    raise EnvError(f"{name}={value!r} is not a boolean; use 1 or 0")


def _int(name: str, value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        from .errors import EnvError

        raise EnvError(f"{name}={value!r} is not an integer; set it to a whole number or unset it") from None
    if n < 0:
        from .errors import EnvError

        raise EnvError(f"{name}={value!r} is negative; set it to a number >= 0 or unset it")
    return n


# The most emulated CUDA devices on cpu. Each costs a device record, a generator and its memory
# statistics, made at `import torch`; a count in the billions hung it. 64 is more than any one host
# has GPUs (a DGX has 8 or 16), so a larger value is a typo.
CPU_DEVICES_MAX = 64


def _device_count(devices: str, zero: str) -> "Callable[[str, str], int]":
    """A parser of a device count, 0..CPU_DEVICES_MAX (the same bound for the simulated NPUs)."""

    def parse(name: str, value: str) -> int:
        n = _int(name, value)
        if n > CPU_DEVICES_MAX:
            from .errors import EnvError

            raise EnvError(f"{name}={value!r} is more than the {CPU_DEVICES_MAX} {devices}; "
                           f"set it to 0..{CPU_DEVICES_MAX} ({zero}) or unset it")
        return n

    return parse


_cpu_devices = _device_count("emulated devices cudashim allows on cpu", "0: no CUDA device")
_npu_devices = _device_count("simulated NPUs cudashim allows", "0: no NPU")


def _str(name: str, value: str) -> str:
    return value.strip()


def _csv(name: str, value: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in value.split(",") if p.strip())


def _platform(name: str, value: str) -> str:
    from ._platforms import PLATFORMS

    v = value.strip().lower()
    if v not in PLATFORMS:
        from .errors import EnvError

        raise EnvError(f"{name}={value!r} is not a platform; use {', '.join(PLATFORMS[:-1])} or {PLATFORMS[-1]} (or unset it to detect)")
    return v


class Var(_Record):
    """One variable the shim reads: Var(name, parse, default, doc)."""

    __slots__ = ("name", "parse", "default", "doc")
    name: str
    parse: "Callable[[str, str], object]"
    default: object
    doc: str


# The variables read, as rows: name -> (parse, default, doc). get() reads these in every shimmed
# start-up; the Var records of READ are built from them on first use (32 records of a table were a
# tenth of what the bootstrap added to `python -c pass`).
_READ_ROWS: "dict[str, tuple[Callable[[str, str], object], object, str]]" = {
    "CUDASHIM_DISABLE": (_bool, False, "1 turns the whole shim off (trampolines become no-ops)"),
    "CUDASHIM_PLATFORM": (_platform, None, "override detection: ascend | nvidia | cpu"),
    "CUDASHIM_CONFIG": (_str, None, "path of the config file to use instead of searching"),
    "CUDASHIM_REPORT": (_str, None, "write the migration report (JSON) to this path at exit"),
    "CUDASHIM_REPORT_ARGS": (_bool, False, "1 records the program's arguments in the report (they may hold secrets)"),
    "CUDASHIM_REPORT_OWNER": (_str, None, "set by the report: pid of the process writing the base report file"),
    "CUDASHIM_DISABLE_PATCHES": (_csv, (), "patch keys or built-in pack names to switch off"),
    "CUDASHIM_DEVICES_PER_RANK": (_int, None, "with LOCAL_RANK: give each rank N consecutive devices"),
    "CUDASHIM_CPU_DEVICES": (_cpu_devices, None, "torch.cuda.device_count() on cpu, 0..64 (default LOCAL_WORLD_SIZE or 1)"),
    "CUDASHIM_PROFILE": (_str, None, "the GPU (or NPU) the emulated devices present: a profile name (h100-80gb) or "
                         "the path of a profile .toml (docs/profiles-and-memory.md)"),
    "CUDASHIM_BUILD_DIR": (_str, None, "where the emulated device's native core is built and cached"),
    "CUDASHIM_NCCL_NUM_SMS": (_int, 32, "NCCL min/max CTAs in get_distributed_options()"),
    "CUDASHIM_STRICT": (_bool, False, "set by `cudashim run`: bootstrap errors stop the process (exit 2)"),
    "CUDASHIM_SYSROOT": (_str, None, "root under which hardware probes read /dev, /sys, /proc (tests)"),
    "CUDASHIM_SIMULATE": (_bool, False, "1 with CUDASHIM_PLATFORM=ascend: the simulated Ascend NPU; hardware "
                          "discovery reads the packaged simulated host"),
    "CUDASHIM_NPU_DEVICES": (_npu_devices, None, "with CUDASHIM_SIMULATE: the simulated host's NPU count, 0..64 "
                             "(default: its davinci device nodes, 8)"),
    "CUDASHIM_WHEEL_CACHE": (_str, None, "folder holding the torch-npu wheel the simulated NPU's torch_npu is "
                             "assembled from (default ~/.cache/cudashim/wheels; scripts/install fills it)"),
    "CUDASHIM_TRITON_ASCEND_COMPILE": (_bool, False, "1 on the simulated NPU: compile each launched Triton kernel "
                                       "through the triton-ascend wheel's frontend (no CANN) for the readiness "
                                       "report"),
    "TRITON_ALL_BLOCKS_PARALLEL": (_str, None, "triton-ascend's switch lifting its 65,535-program grid limit; the "
                                   "simulated NPU reads it as triton-ascend does"),
    "CUDASHIM_DEBUG": (_bool, False, "trace what the shim does on stderr"),
    "CUDA_VISIBLE_DEVICES": (_str, None, "CUDA's visible devices"),
    "ASCEND_RT_VISIBLE_DEVICES": (_str, None, "CANN's visible devices"),
    "LOCAL_RANK": (_int, None, "rank on this node, set by launchers (torchrun)"),
    "LOCAL_WORLD_SIZE": (_int, None, "ranks on this node, set by launchers (torchrun)"),
    "CUDASHIM_SCRIPT_DIR": (_str, None, "set by `cudashim run`: folder the config search starts from"),
    "CUDASHIM_RANK_DEVICES": (_str, None, "set by the bootstrap: 'rank:per_rank' already assigned"),
    "PYTORCH_CUDA_ALLOC_CONF": (_str, None, "CUDA allocator settings; translated on ascend"),
    "PYTORCH_NPU_ALLOC_CONF": (_str, None, "NPU allocator settings; an explicit value wins"),
    "PYTORCH_ALLOC_CONF": (_str, None, "generic allocator settings (torch >= 2.9), read by torch_npu"),
    "NCCL_SOCKET_IFNAME": (_str, None, "NCCL's network interface; carried over to HCCL_SOCKET_IFNAME on ascend"),
}


def raw(name: str, environ: "Mapping[str, str] | None" = None) -> str | None:
    """The unparsed value, or None when unset."""
    return (os.environ if environ is None else environ).get(name)


def get(name: str, environ: "Mapping[str, str] | None" = None) -> object:
    """The typed value of a variable in READ; its default when unset; EnvError when malformed."""
    parse, default, _ = _READ_ROWS[name]
    value = raw(name, environ)
    if value is None:
        return default
    return parse(name, value)


# ---------------------------------------------------------------------------------------------------
# What the bootstrap sets, per platform (docs/design.md §3 step 4). Data, printed by `cudashim doctor`.
#
# mode "default": set only when absent; an explicit user value always wins.
# mode "owned":   the shim needs this exact value and sets it even over a user value, saying so once.
# source:         a CUDA-flavoured variable that, when set, is translated into this one instead of
#                 `value` (the rule's own translation; see apply_platform_env).
# when:           a condition the rule applies under (see _CONDITIONS), None for always.


class EnvRule(_Record):
    """One line of PLATFORM_ENV: EnvRule(platform, name, value, mode, why, source=None, when=None)."""

    __slots__ = ("platform", "name", "value", "mode", "why", "source", "when")
    _defaults = {"source": None, "when": None}
    platform: str
    name: str
    value: str | None  # None: only ever set from `source`
    mode: str  # "default" | "owned"
    why: str
    source: str | None
    when: str | None


# (platform, name, value, mode, why[, source[, when]]): the fields of EnvRule, as rows. apply_platform_env
# reads these in every shimmed start-up; PLATFORM_ENV, the EnvRule records, is built on first use.
_RULE_ROWS: "tuple[tuple[str | None, ...], ...]" = (
    ("ascend", "PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True", "default",
     "the KV pool and weights fragment fixed segments; translated from PYTORCH_CUDA_ALLOC_CONF when set",
     "PYTORCH_CUDA_ALLOC_CONF"),
    ("ascend", "TASK_QUEUE_ENABLE", "0", "owned",
     "direct op dispatch: graph capture must see exactly the tasks of a step"),
    ("ascend", "HCCL_BUFFSIZE", "16", "owned",
     "16 MB collective buffers; larger ones eat the KV pool"),
    ("ascend", "HCCL_CONNECT_TIMEOUT", "240", "default", "tolerate slow nodes while ranks connect"),
    ("ascend", "HCCL_EXEC_TIMEOUT", "200", "default", "tolerate slow collectives"),
    ("ascend", "HCCL_HOST_SOCKET_PORT_RANGE", "auto", "default", "no port clashes between instances"),
    ("ascend", "HCCL_NPU_SOCKET_PORT_RANGE", "auto", "default", "no port clashes between instances"),
    ("ascend", "TILELANG_DEFAULT_TARGET", "ascend", "default",
     "torch.cuda.is_available() is True under the alias, so TileLang would otherwise pick cuda"),
    ("ascend", "HCCL_SOCKET_IFNAME", None, "default", "the NCCL interface choice carries over to HCCL",
     "NCCL_SOCKET_IFNAME"),
    ("nvidia", "PYTORCH_NVML_BASED_CUDA_CHECK", "1", "default",
     "torch.cuda.is_available() asks NVML instead of creating a context that would freeze visibility"),
    ("cpu", "TORCH_DEVICE_BACKEND_AUTOLOAD", "0", "default",
     "torch_npu is installed but there is no NPU: torch's backend autoload would fail `import torch`",
     None, "torch_npu_installed"),
)

# Keys the NPU caching allocator (torch_npu NPUAllocatorConfig) accepts: its own, then the common
# ones it supports. Anything else in a translated value would make torch_npu refuse to start.
NPU_ALLOC_KEYS: frozenset[str] = frozenset({
    "pin_memory_expandable_segments", "pinned_mem_register", "base_addr_aligned_kb", "page_size",
    "segment_size_mb", "multi_stream_lazy_reclaim", "pinned_reserve_segment_size_mb",
    "per_process_memory_fraction", "release_lock_on_npumalloc",
    "max_split_size_mb", "garbage_collection_threshold", "roundup_power2_divisions", "expandable_segments",
    "pinned_use_background_threads", "large_segment_size_mb", "max_non_split_rounding_mb",
})
# CUDA keys with an NPU twin under another name
CUDA_TO_NPU_ALLOC_KEYS: dict[str, str] = {"release_lock_on_cudamalloc": "release_lock_on_npumalloc"}
# torch_npu refuses expandable segments together with these, so the default is not added next to them
_EXCLUDES_EXPANDABLE = ("expandable_segments", "max_split_size_mb", "garbage_collection_threshold")

Change = tuple[str, str | None]  # (name, previous value or None): what undo() puts back


def _alloc_items(value: str) -> list[tuple[str, str]]:
    """'a:1,b:[1:2,3:4]' -> [('a', '1'), ('b', '[1:2,3:4]')]: commas inside brackets do not split."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(value + ","):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            part = value[start:i].strip()
            start = i + 1
            if part:
                key, _, val = part.partition(":")
                items.append((key.strip(), val.strip()))
    return items


def translate_alloc_conf(value: str) -> tuple[str, tuple[str, ...]]:
    """A PYTORCH_CUDA_ALLOC_CONF value as PYTORCH_NPU_ALLOC_CONF: (translated, dropped keys).

    Known keys are kept (renamed where the NPU calls them differently), unknown ones dropped;
    expandable_segments:True is added unless the value says otherwise or sets a key it excludes.
    """
    kept: list[tuple[str, str]] = []
    dropped: list[str] = []
    for key, val in _alloc_items(value):
        key = CUDA_TO_NPU_ALLOC_KEYS.get(key, key)
        if key in NPU_ALLOC_KEYS:
            kept.append((key, val))
        else:
            dropped.append(key)
    if not any(k in _EXCLUDES_EXPANDABLE for k, _ in kept):
        kept.insert(0, ("expandable_segments", "True"))
    return ",".join(f"{k}:{v}" for k, v in kept), tuple(dropped)


def _torch_npu_installed() -> bool:
    # only located, never imported: importing torch_npu imports torch, which must not happen here.
    # importlib.machinery.PathFinder is this class; the bootstrap (cpu) asks in every shimmed process,
    # and importing importlib.machinery there would load importlib and warnings for nothing
    try:
        from _frozen_importlib_external import PathFinder
    except ImportError:  # pragma: no cover - an interpreter without CPython's frozen importlib
        from importlib.machinery import PathFinder

    try:
        return PathFinder.find_spec("torch_npu") is not None
    except (ImportError, ValueError):
        return False


_CONDITIONS: "dict[str, Callable[[], bool]]" = {"torch_npu_installed": _torch_npu_installed}


def _alloc_conf_value(value: str | None, source: str | None, env: "Mapping[str, str]", notes: list[str]) -> str | None:
    """What PYTORCH_NPU_ALLOC_CONF should be set to, or None to leave it alone."""
    npu, generic = env.get("PYTORCH_NPU_ALLOC_CONF"), env.get("PYTORCH_ALLOC_CONF")
    if npu is not None and generic is not None and npu != generic:
        # torch_npu copies the NPU value over PYTORCH_ALLOC_CONF itself, so equal values are what a
        # child of a torch_npu process inherits; different ones mean two settings fight
        from .errors import EnvError

        raise EnvError(
            f"PYTORCH_NPU_ALLOC_CONF={npu!r} and PYTORCH_ALLOC_CONF={generic!r} are both set and differ; "
            f"torch_npu honours only one of them on ascend: unset one (keep PYTORCH_NPU_ALLOC_CONF)"
        )
    if npu is not None or generic is not None:
        return None  # explicit wins; and a second NPU value next to PYTORCH_ALLOC_CONF would conflict
    cuda = env.get(source) if source else None
    if cuda is None:
        return value
    translated, dropped = translate_alloc_conf(cuda)
    if dropped:
        notes.append(
            f"{source}={cuda!r}: the NPU allocator does not know {', '.join(repr(k) for k in dropped)}; "
            f"dropped and set PYTORCH_NPU_ALLOC_CONF={translated!r} (set PYTORCH_NPU_ALLOC_CONF yourself to choose)"
        )
    return translated


def apply_platform_env(
    platform: str, environ: "MutableMapping[str, str] | None" = None, *, notes: list[str] | None = None
) -> list[Change]:
    """Apply PLATFORM_ENV for `platform` to environ (default os.environ); return [(name, previous)].

    Messages worth a warning (an owned value overridden, allocator keys dropped) are appended to
    `notes`. Raises EnvError, having changed nothing, when the environment contradicts itself.
    """
    env = os.environ if environ is None else environ
    notes = [] if notes is None else notes
    planned: list[tuple[str, str]] = []
    for row in _RULE_ROWS:
        if row[0] != platform:
            continue
        _, name, value, mode, why, source, when = row + (None,) * (7 - len(row))
        if when is not None and not _CONDITIONS[when]():
            continue
        current = env.get(name)
        if name == "PYTORCH_NPU_ALLOC_CONF":
            value = _alloc_conf_value(value, source, env, notes)
        elif source is not None and env.get(source) is not None:
            value = env[source]
        if value is None or current == value:
            continue
        if current is not None and mode == "default":
            continue  # the user's explicit value wins
        if current is not None:
            notes.append(f"{name}={current!r} overridden to {value!r} on {platform}: the shim owns it ({why})")
        planned.append((name, value))
    changes: list[Change] = []
    for name, value in planned:
        changes.append((name, env.get(name)))
        env[name] = value
    return changes


def home_folder(what: str, variable: str, environ: "Mapping[str, str] | None" = None) -> str:
    """The user's home folder, for a cache under it: HOME, or where HOME is unset or empty the password
    database's entry (os.path.expanduser gives "" + "/.cache" = "/.cache" for HOME=""). Raises EnvError
    naming `variable` (the setting that places `what` elsewhere) when neither names a usable folder."""
    env = os.environ if environ is None else environ
    home = env.get("HOME", "")
    if not home:
        try:
            import pwd

            home = pwd.getpwuid(os.getuid()).pw_dir
        except (ImportError, KeyError):
            home = ""
        home = "" if home == "/" else home  # an account without a home folder of its own
    if not os.path.isabs(home):
        from .errors import EnvError

        raise EnvError(f"HOME={env.get('HOME', '')!r} and the password database give no home folder for {what}; "
                       f"set {variable} to a writable folder (or HOME)")
    return home


def __getattr__(name: str) -> object:
    # the tables as records (doctor, tests), built from the rows on first use and then kept
    if name == "READ":
        value: object = {n: Var(n, *row) for n, row in _READ_ROWS.items()}
    elif name == "PLATFORM_ENV":
        value = tuple(EnvRule(*row) for row in _RULE_ROWS)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def undo(changes: list[Change], environ: "MutableMapping[str, str] | None" = None) -> None:
    """Put back what apply_platform_env (or any [(name, previous)] list) changed, newest first."""
    env = os.environ if environ is None else environ
    for name, previous in reversed(changes):
        if previous is None:
            env.pop(name, None)
        else:
            env[name] = previous
