"""nano-vllm, unmodified, on the simulated Ascend NPU with no patch line for its Triton KV-store kernel
(examples/nano_vllm/cudashim.toml has none for ascend): `store_kvcache_kernel` runs through the Triton route
with triton-ascend's launch check, its tokens equal the patch-map run's (the kernel mapped to the platform's
store, as a config with the line does), and the readiness report says it compiles for Ascend (the opt-in
check through the triton-ascend wheel's frontend, CUDASHIM_TRITON_ASCEND_COMPILE=1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from nano_vllm_e2e import EXAMPLE, MARKS, run

pytestmark = MARKS

_LINE = '"nanovllm.layers.attention:store_kvcache" = "adapters:store_kvcache"'


def _sim(checkpoint: Path, tmp: Path, name: str, env: dict[str, str]):
    from cudashim.emulated.npu.site import fetch_wheel
    from cudashim.triton_route import ascend_compile

    for wheel, why in (fetch_wheel(), ascend_compile.fetch()):
        if wheel is None:
            pytest.skip(f"needs the wheel: {why}")
    out, report = tmp / f"{name}.json", tmp / f"{name}.report.json"
    r = run(["-m", "cudashim", "run", "--platform", "ascend", "--simulate", "--report", str(report),
             str(EXAMPLE / "run.py"), str(checkpoint), "--json", str(out)], env, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return r, json.loads(out.read_text()), json.loads(report.read_text())


def test_nano_vllm_runs_its_triton_kernel_on_the_simulated_npu(checkpoint: Path, tmp_path: Path) -> None:
    import tomllib

    patches = tomllib.loads((EXAMPLE / "cudashim.toml").read_text())["patches"]
    assert "nanovllm.layers.attention:store_kvcache" not in {**patches, **patches.get("ascend", {})}
    r, tokens, report = _sim(checkpoint, tmp_path, "triton", {"CUDASHIM_TRITON_ASCEND_COMPILE": "1"})
    (row,) = report["npu_readiness"]["triton_kernels"]
    assert row["kernel"] == "nanovllm.layers.attention:store_kvcache_kernel"
    assert row["launches"] > 0 and row["largest_grid_programs"] > 1
    assert row["compiles_for_ascend"] == "yes"
    assert row["first_call_site"].startswith(str(EXAMPLE / "run.py"))
    assert "1 Triton kernel(s): 1 compile for Ascend" in r.stderr

    # the patch-map run: the same example with the ascend line a config without triton-ascend would carry
    pm = tmp_path / "patch_map"
    pm.mkdir()
    (pm / "cudashim.toml").write_text((EXAMPLE / "cudashim.toml").read_text() + f"\n[patches.ascend]\n{_LINE}\n")
    os.symlink(EXAMPLE / "adapters.py", pm / "adapters.py")
    _, mapped, mapped_report = _sim(checkpoint, tmp_path, "mapped", {"CUDASHIM_CONFIG": str(pm / "cudashim.toml")})
    assert mapped_report["npu_readiness"]["triton_kernels"] == []  # the kernel never launched there
    assert tokens["token_ids"] == mapped["token_ids"]
