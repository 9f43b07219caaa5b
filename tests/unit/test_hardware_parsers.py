"""Property tests for every hardware parser: valid input round-trips, any input is safe.

Expected values are derived from the generated machine description inside each test, never by the
parser under test.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from cudashim.errors import VisibilityError
from cudashim.hardware import device
from cudashim.hardware.visible import visible_device_ids
from cudashim.hardware.ascend import parse_npu_smi_topo
from cudashim.hardware.cpu import format_cpu_list, parse_cpu_list, parse_lscpu
from cudashim.hardware.nvidia import normalize_bus_id, parse_information, parse_numa_node

# no deadline: the CI box is 2 shared cores, and a slow example is not a failure of a parser
_prop = settings(max_examples=100, deadline=None)

cpu_ids = st.integers(min_value=0, max_value=4095)
spaces = st.text(alphabet=" \t", max_size=3)


# ---- cpulists (npu-smi CPU Affinity cells, sysfs node cpulist) -----------------------------------

@_prop
@given(st.frozensets(cpu_ids, max_size=300))
def test_cpu_list_round_trips(cpus):
    assert parse_cpu_list(format_cpu_list(cpus)) == cpus


@_prop
@given(st.lists(st.tuples(cpu_ids, st.integers(0, 64)), min_size=1, max_size=8), st.data())
def test_cpu_list_of_ranges_with_whitespace(ranges, data):
    expected = set()
    items = []
    for lo, width in ranges:
        hi = lo + width
        expected.update(range(lo, hi + 1))
        item = str(lo) if width == 0 else f"{lo}{data.draw(spaces)}-{data.draw(spaces)}{hi}"
        items.append(data.draw(spaces) + item + data.draw(spaces))
    assert parse_cpu_list(",".join(items)) == frozenset(expected)


@_prop
@given(st.text(max_size=60))
def test_cpu_list_never_raises(text):
    result = parse_cpu_list(text)
    assert result is None or all(isinstance(c, int) and c >= 0 for c in result)


# ---- visible-device strings ------------------------------------------------------------------

@_prop
@given(st.lists(st.integers(0, 10_000), unique=True, min_size=1, max_size=16), st.data())
def test_visible_ids_round_trip_with_whitespace(ids, data):
    value = ",".join(data.draw(spaces) + str(i) + data.draw(spaces) for i in ids)
    assert visible_device_ids(value, "CUDA_VISIBLE_DEVICES") == tuple(ids)


@_prop
@given(st.text(max_size=30))
def test_visible_ids_any_text_is_ids_or_one_clear_error(text):
    try:
        ids = visible_device_ids(text, "CUDA_VISIBLE_DEVICES")
    except VisibilityError as exc:
        assert str(exc).startswith(f"CUDA_VISIBLE_DEVICES={text!r}")
    else:
        assert len(set(ids)) == len(ids) and all(i >= 0 for i in ids)


@_prop
@given(st.lists(st.integers(0, 64), min_size=2, max_size=6).filter(lambda l: len(set(l)) < len(l)))
def test_visible_ids_duplicates_are_refused(ids):
    try:
        visible_device_ids(",".join(map(str, ids)), "ASCEND_RT_VISIBLE_DEVICES")
    except VisibilityError as exc:
        assert "twice" in str(exc)
    else:
        raise AssertionError("duplicates accepted")


# ---- lscpu -p=CPU,NODE,SOCKET,CORE,ONLINE ---------------------------------------------------------

@st.composite
def machines(draw):
    """A machine: nodes x cores-per-node x threads-per-core, CPU numbering interleaved like Linux
    (all first threads, then all second threads), some CPUs offline."""
    nodes = draw(st.integers(1, 4))
    cores = draw(st.integers(1, 6))
    threads = draw(st.integers(1, 2))
    total_cores = nodes * cores
    rows = []
    for t in range(threads):
        for core in range(total_cores):
            cpu = t * total_cores + core
            rows.append([cpu, core // cores, core // cores, core, draw(st.sampled_from("YYYN"))])
    return rows


@_prop
@given(machines(), st.randoms(use_true_random=False))
def test_lscpu_keeps_the_smallest_online_cpu_per_core(rows, rnd):
    expected: dict[int, set[int]] = {}
    first: dict[int, int] = {}
    for cpu, node, _socket, core, online in rows:
        if online == "Y" and (core not in first or cpu < first[core]):
            first[core] = cpu
    node_of = {core: node for _cpu, node, _s, core, _o in rows}
    for core, cpu in first.items():
        expected.setdefault(node_of[core], set()).add(cpu)
    shuffled = list(rows)
    rnd.shuffle(shuffled)  # lscpu order must not matter
    text = "# CPU,Node,Socket,Core,Online\n" + "".join(",".join(map(str, r)) + "\n" for r in shuffled)
    got = parse_lscpu(text)
    if not expected:
        assert got is None
    else:
        assert got == {n: frozenset(c) for n, c in expected.items()}


@_prop
@given(st.text(max_size=200))
def test_lscpu_any_text_is_a_table_or_none(text):
    result = parse_lscpu(text)
    assert result is None or all(isinstance(n, int) and isinstance(c, frozenset) for n, c in result.items())


# ---- npu-smi info -t topo -----------------------------------------------------------------------

links = st.sampled_from(["HCCS", "PIX", "PXB", "SYS", "PHB", "UB", "SIO", "HCCS_SW"])


@_prop
@given(st.lists(st.frozensets(cpu_ids, min_size=1, max_size=40), min_size=1, max_size=16), links,
       st.booleans(), st.booleans())
def test_npu_smi_topo_round_trips(affinities, link, tab_indent, legend):
    n = len(affinities)
    head = ("\t" if tab_indent else "           ") + "   ".join(f"NPU{j}" for j in range(n)) + "   CPU Affinity"
    rows = [head]
    for i, cpus in enumerate(affinities):
        cells = " ".join("X" if i == j else link for j in range(n))
        rows.append(f"NPU{i}   {cells}   {format_cpu_list(cpus)}")
    if legend:
        rows += ["", "Legend:", "", "  X    = Self", "  NPU1 = not a row"]
    assert parse_npu_smi_topo("\n".join(rows)) == dict(enumerate(affinities))


@_prop
@given(st.text(max_size=300))
def test_npu_smi_any_text_is_a_table_or_none(text):
    result = parse_npu_smi_topo(text)
    assert result is None or all(isinstance(k, int) and v for k, v in result.items())


@_prop
@given(st.text(alphabet=st.sampled_from(list("NPU0123456789 X-,\nHCSCPUAffinity\t")), max_size=300))
def test_npu_smi_near_miss_text_is_safe(text):
    parse_npu_smi_topo(text)


# ---- numa_node / ub_totalues files, bus ids, procfs information ------------------------------------

@_prop
@given(st.integers(0, 1 << 20), st.sampled_from(["", "\n", " \n"]))
def test_numa_node_file_round_trips(node, tail):
    assert parse_numa_node(f"{node}{tail}") == node


@_prop
@given(st.text(max_size=20))
def test_numa_node_any_text_is_a_node_or_unknown(text):
    result = parse_numa_node(text)
    assert result is None or (isinstance(result, int) and result >= 0)
    if text.strip().startswith("-"):
        assert result is None


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=40))
def test_read_int_any_bytes_is_an_int_or_none(data):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "attr")
        with open(path, "wb") as f:
            f.write(data)
        result = device.read_int(path)
    assert result is None or isinstance(result, int)
    stripped = data.strip()
    if stripped.isdigit():
        assert result == int(stripped)


@_prop
@given(st.integers(0, 0xFFFF), st.integers(0, 0xFF), st.integers(0, 0x1F), st.integers(0, 7),
       st.booleans(), st.booleans())
def test_bus_id_spellings_normalize_to_one(domain, bus, dev, fn, wide, upper):
    text = f"{domain:08x}:{bus:02x}:{dev:02x}.{fn}" if wide else f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"
    text = text.upper() if upper else text
    assert normalize_bus_id(text) == f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"


@_prop
@given(st.text(max_size=40))
def test_bus_id_any_text_is_normalized_or_none(text):
    result = normalize_bus_id(text)
    assert result is None or normalize_bus_id(result) == result


@_prop
@given(st.dictionaries(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefgh", min_size=1, max_size=12)
                       .map(str.strip).filter(bool),
                       st.text(alphabet="0123456789abcdef:. -", max_size=20).map(str.strip), max_size=8))
def test_procfs_information_round_trips(fields):
    text = "".join(f"{k}: \t {v}\n" for k, v in fields.items())
    assert parse_information(text) == fields
