"""What the start-up diet replaced must behave as what it replaced.

The bootstrap path no longer imports re or dataclasses: /dev names and PCI bus ids are parsed with
string code, and the value classes are cudashim.envs._Record subclasses. These tests hold the
string parsers to the exact regular expressions they replaced (as oracles, compiled here), and the
records to what frozen dataclasses gave: construction errors, equality, hashing, immutability,
repr, replace, pickling and copying.
"""

from __future__ import annotations

import copy
import pickle
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cudashim.config import Config, PatchEntry
from cudashim.envs import EnvRule
from cudashim.hardware import NpuDevice, device
from cudashim.hardware.nvidia import GpuDevice, NvmlDevice, normalize_bus_id

# the expressions hardware/nvidia.py and hardware/ascend.py used before
_BUS_ID = re.compile(r"^\s*([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\s*$")


def _bus_oracle(text: str) -> str | None:
    m = _BUS_ID.match(text)
    if m is None:
        return None
    domain, bus, dev, fn = (int(g, 16) for g in m.groups())
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn:x}"


_bus_chars = st.sampled_from(list("0123456789abcdefABCDEFgG:. \t\n\u00a0\u2003-x٣"))


@given(st.lists(_bus_chars, max_size=20).map("".join) | st.text(max_size=20))
def test_bus_id_parser_matches_the_regex_it_replaced(text):
    assert normalize_bus_id(text) == _bus_oracle(text)


@pytest.mark.parametrize("text", ["0000:18:00.0", "00000000:1A:00.7", " 0:1:2.3\n", "1:2:3.8", "1:2:3",
                                  "123456789:00:00.0", "0:000:0.0", "0:0:0.0.0", ":0:0.0", "0:0:0."])
def test_bus_id_examples_match_the_regex(text):
    assert normalize_bus_id(text) == _bus_oracle(text)


_name_chars = st.sampled_from(list("davincinvidiaudmaNPU0123456789_\n ٣²"))


@given(st.sampled_from(["davinci", "nvidia", "udma", "NPU"]), st.lists(_name_chars, max_size=12).map("".join))
def test_numbered_names_match_the_regex_they_replaced(prefix, rest):
    for name in (prefix + rest, rest):
        m = re.match(rf"^{prefix}(\d+)$", name)
        assert device.numbered(name, prefix) == (int(m.group(1)) if m else None)


@pytest.mark.parametrize("name,want", [("davinci0", 0), ("davinci12", 12), ("davinci_manager", None),
                                       ("davinci", None), ("davinci1\n", 1), ("davinci1\n\n", None),
                                       ("davinci٣", 3), ("davinci²", None), ("xdavinci1", None)])
def test_numbered_examples(name, want):
    assert device.numbered(name, "davinci") == want


def test_record_construction_like_a_dataclass():
    e = PatchEntry("a:b", "c:d", None, "src")
    assert e == PatchEntry(target="a:b", replacement="c:d", platform=None, source="src")
    assert (e.target, e.replacement, e.platform, e.source) == ("a:b", "c:d", None, "src")
    assert Config() == Config(None, None, (), frozenset())
    with pytest.raises(TypeError, match="missing required argument: 'source'"):
        PatchEntry("a:b", "c:d", None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        Config(nope=1)
    with pytest.raises(TypeError, match="takes 5 arguments but 6"):
        Config(None, None, (), frozenset(), frozenset(), 1)
    with pytest.raises(TypeError, match="multiple values for argument 'path'"):
        Config(None, path=None)
    assert EnvRule("cpu", "X", "1", "default", "why").source is None  # declared defaults


def test_record_value_semantics():
    a = Config(path=Path("/x/cudashim.toml"), platform="cpu", disable=frozenset({"flash_attn"}))
    b = Config(Path("/x/cudashim.toml"), "cpu", (), frozenset({"flash_attn"}))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != Config() and a != ("not", "a", "config")
    # same fields, different record type: not equal (as dataclasses)
    assert NvmlDevice(0, "n", None, None) != GpuDevice(0, None, "n", None, None)
    with pytest.raises(AttributeError):
        a.platform = "nvidia"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del a.platform  # type: ignore[misc]
    assert a._replace(platform="ascend") == Config(Path("/x/cudashim.toml"), "ascend", (), frozenset({"flash_attn"}))
    assert a.platform == "cpu"
    assert repr(PatchEntry("a:b", "c:d", None, "s")) == "PatchEntry(target='a:b', replacement='c:d', platform=None, source='s')"


@pytest.mark.parametrize("value", [
    Config(path=Path("/x/pyproject.toml"), platform="cpu", patches=(PatchEntry("a:b", "c:d", "cpu", "s"),)),
    GpuDevice(index=0, bus_id="0000:18:00.0", name="NVIDIA H200", compute_capability=(9, 0), numa_node=1),
    NpuDevice("udma0", 0, 1),
])
def test_records_pickle_and_copy(value):
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.copy(value) == value and copy.deepcopy(value) == value


def test_npu_device_is_still_a_named_tuple():
    d = NpuDevice("davinci3", 3, None)
    assert d == ("davinci3", 3, None) and d._fields == ("entry", "physical_id", "numa_node")
    assert d.physical_id == 3 and repr(d) == "NpuDevice(entry='davinci3', physical_id=3, numa_node=None)"
