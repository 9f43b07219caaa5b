"""The capability table: its shape, require()/limits, and the README copy staying in step with the data."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import cudashim
from cudashim import _state
from cudashim.platform import capabilities as caps
from cudashim.errors import CapabilityError
from cudashim.platform.contract import PlatformCPU

README = Path(__file__).resolve().parents[2] / "README.md"

# Fixed ids other owners code against: renaming one breaks them, so the list is spelled out here.
IDS = (
    "cuda_graphs", "cuda_graph_keep_graph", "cuda_graph_instantiate", "graph_event_timers", "symmetric_memory",
    "batch_invariant", "pdl", "fp8_einsum_output", "per_token_cast_granularity", "force_topk_bound",
    "kv_cache_fp8_fp32_scale", "host_register_pinning", "ipc_export_alignment", "collective_backend",
    "flash_attention", "tilelang_kernels", "cuda_cpp_extensions", "triton_kernels",
)
CELLS = [(c.id, p) for c in caps.TABLE for p in caps.PLATFORMS]


@pytest.fixture(autouse=True)
def _fresh():
    _state.reset()
    yield
    _state.reset()


def test_every_contract_id_is_in_the_table():
    assert set(IDS) <= set(caps.ids())
    assert len(caps.ids()) == len(set(caps.ids()))


@pytest.mark.parametrize("cap_id,plat", CELLS)
def test_cells_are_well_formed(cap_id, plat):
    cell = caps.entry(cap_id, plat)
    assert cell.status in caps.STATUSES and cell.level in caps.LEVELS and cell.note
    assert cell.failure in caps.FAILURES or cell.failure is None
    if cell.status == "unsupported" or cell.failure == caps.WARN and cell.status == "emulated":
        assert cell.failure and cell.way_out, "a cell that fails or degrades must say how and what to do instead"
    if plat == "ascend":
        assert cell.level != "L3", "nothing here runs on an Ascend NPU (docs/design.md §6)"
    else:
        assert cell.level != "L1s", "L1s is the simulated Ascend NPU's level: an ascend cell only"


@pytest.mark.parametrize("cap_id,plat", [c for c in CELLS if caps.entry(*c).status == "unsupported"])
def test_unsupported_raises_naming_api_platform_and_way_out(cap_id, plat):
    with pytest.raises(CapabilityError) as exc:
        caps.require(cap_id, plat, api="my.api")
    msg = str(exc.value)
    assert "my.api" in msg and plat in msg and caps.entry(cap_id, plat).way_out in msg and cap_id in msg
    assert not caps.supported(cap_id, plat)


def test_cuda_graphs_are_emulated_on_cpu():
    cudashim.require("cuda_graphs", "cpu", api="torch.cuda.CUDAGraph")  # the emulated device captures them
    assert caps.entry("cuda_graphs", "cpu").status == caps.E and caps.supported("cuda_graphs", "cpu")


def test_cpu_cells_describe_one_path():
    # the emulated device is the cpu platform: no cell sends the user to another backend
    for cap in caps.TABLE:
        cell = cap.cells["cpu"]
        assert cell.level in caps.LEVELS
        assert "CUDASHIM_CPU_BACKEND" not in cell.note + cell.way_out and "alias" not in cell.note, cap.id


@pytest.mark.parametrize("cap_id,plat", [c for c in CELLS if caps.entry(*c).failure != caps.WARN
                                         and caps.entry(*c).status != "unsupported"])
def test_working_cells_are_silent(cap_id, plat):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert caps.require(cap_id, plat) is None
    assert caps.supported(cap_id, plat)


def test_degraded_cells_warn_once_until_reset():
    def count() -> int:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            caps.require("pdl", "ascend")
            caps.require("pdl", "ascend")
        return len(caught)

    assert count() == 1
    assert count() == 0
    _state.reset()
    assert count() == 1


def test_default_platform_is_the_current_one(monkeypatch):
    monkeypatch.setenv("CUDASHIM_PLATFORM", "cpu")
    with pytest.raises(CapabilityError, match="on cpu"):
        caps.require("symmetric_memory")
    caps.require("symmetric_memory", "nvidia")  # an explicit platform beats the current one
    with pytest.raises(CapabilityError, match="on cpu"):
        caps.require("symmetric_memory", PlatformCPU())  # a Platform instance works too


def test_limits():
    assert caps.limit("force_topk_bound", "nvidia") == 16384
    assert caps.limit("force_topk_bound", "ascend") == 4096
    assert caps.limit("ipc_export_alignment", "ascend") == 2 * 1024 * 1024
    caps.check_limit("force_topk_bound", 4096, "ascend")
    caps.check_limit("force_topk_bound", 16384, "nvidia")
    with pytest.raises(CapabilityError, match="4097.*ascend.*4096"):
        caps.check_limit("force_topk_bound", 4097, "ascend")
    with pytest.raises(CapabilityError, match="16385"):
        caps.check_limit("force_topk_bound", 16385, "nvidia")
    caps.check_limit("ipc_export_alignment", 4 * 1024 * 1024, "ascend")
    caps.check_limit("ipc_export_alignment", 4096, "nvidia")
    with pytest.raises(CapabilityError, match="not aligned.*ascend"):
        caps.check_limit("ipc_export_alignment", 2 * 1024 * 1024 + 4096, "ascend")


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown capability 'warp_drive'.*cuda_graphs"):
        caps.require("warp_drive", "cpu")
    with pytest.raises(ValueError, match="unknown platform"):
        caps.require("cuda_graphs", "tpu")


def test_markdown_has_a_row_per_capability():
    md = caps.render_markdown()
    for cap in caps.TABLE:
        row = next(line for line in md.splitlines() if f"`{cap.id}`" in line and line.startswith("|"))
        assert row.count("|") == 6
        for plat in caps.PLATFORMS:
            assert caps.entry(cap.id, plat).status in row


def test_readme_copy_is_current():
    assert not caps.update_readme(README, check=True), \
        "README.md capability table is stale; run: python scripts/generate.py --write"


def test_stale_readme_is_detected_and_rewritten(tmp_path):
    copy = tmp_path / "README.md"
    copy.write_text("# x\n\n<!-- capabilities:begin -->\nold\n<!-- capabilities:end -->\ntail\n", encoding="utf-8")
    assert caps.update_readme(copy, check=True)
    assert "old" in copy.read_text()  # a check writes nothing
    assert caps.update_readme(copy)
    text = copy.read_text()
    assert caps.render_markdown() in text and text.endswith("<!-- capabilities:end -->\ntail\n")
    assert not caps.update_readme(copy, check=True)
    assert caps.main(["--check", str(copy)]) == 0


def test_module_entry_point_checks(tmp_path):
    copy = tmp_path / "README.md"
    copy.write_text("<!-- capabilities:begin -->\n<!-- capabilities:end -->\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "cudashim.platform.capabilities", "--check", str(copy)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "stale" in out.stdout
