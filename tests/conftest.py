"""What every test folder shares: helper modules on the path, the tiers as markers, the one `gpu` skip.

- tests/fixtures holds the shared helpers (hwtrees, hwtest, replacements_ref, nvidia_gpu); pyproject's
  `pythonpath` puts it on sys.path, so test files import them by name (no sys.path edits).
- Tiers are markers, named in pyproject.toml; _FOLDER_TIERS below gives every test of a folder its tier,
  and `gpu` is skipped without an NVIDIA GPU (written once below). docs/contributing.md's tier map is
  generated from these two (`python scripts/generate.py --write`).
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from nvidia_gpu import has_nvidia_gpu

__all__ = ["has_nvidia_gpu", "REPO"]

REPO = Path(__file__).resolve().parents[1]

# folder -> what its tests are about (docs/contributing.md's tree is generated from these lines; a test folder
# without one fails `python scripts/generate.py --check`)
FOLDERS = {
    "ascend": "the ascend installer over the real torch_npu sources (contract tests)",
    "cli": "`cudashim doctor` and the command line, in fresh interpreters",
    "cpu": "the cpu platform's device: CUDA idioms, torch.compile, the install",
    "gpu": "on an NVIDIA GPU only (skipped elsewhere): kernels, replacements, doctor, nano-vllm",
    "e2e": "nano-vllm, unmodified, end to end on the emulated and the simulated device",
    "emulated": "the emulated device's semantics (checks written to pass on real CUDA), build, faults",
    "fixtures": "shared helpers, on sys.path: hardware trees, runners, the GPU probe",
    "hooks": "the import hook and patch packs against throwaway packages",
    "kernels": "the TileLang kernel library: dispatch, the torch backend, lowering (L2)",
    "layout": "the repository itself: comments, docs, generated texts, import graph, the package",
    "replacements": "flash-attn and deep_select replacements against float64 oracles",
    "report": "the migration report, in process and end to end",
    "simulated": "the simulated Ascend NPU: coverage, dtype checks, graphs, readiness",
    "subprocess": "activation in fresh interpreters: what the first user line sees",
    "triton_ascend": "Triton on ascend: triton-ascend's refusals on the simulated NPU, its frontend, the real-NPU wiring",
    "triton_route": "Triton kernels on the emulated device: the interpreter's gaps, graphs, compile, the corpus, batching",
    "trust": "untrusted input: configs, environment, launchers, report files",
    "unit": "in-process units: the environment table, capabilities, config, hardware parsers",
}

# folder -> the tier marker every test in it carries
_FOLDER_TIERS = {"subprocess": "subprocess", "hooks": "subprocess", "trust": "subprocess", "ascend": "ascend_contract"}


def _torch_sees_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).resolve().parent
    for item in items:
        try:
            folder = Path(str(item.fspath)).resolve().relative_to(tests).parts[0]
        except ValueError:
            folder = ""
        tier = _FOLDER_TIERS.get(folder)
        if tier is not None:
            item.add_marker(tier)
        gpu = item.get_closest_marker("gpu")
        if gpu is None:
            continue
        # @pytest.mark.gpu: an NVIDIA GPU on the box; @pytest.mark.gpu(torch=True): and torch sees it
        if not has_nvidia_gpu():
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU"))
        elif gpu.kwargs.get("torch") and not _torch_sees_cuda():
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU visible to torch (a CUDA build)"))


_SITE_PACKAGES = tuple({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})


@pytest.fixture(autouse=True)
def _sys_path_restored() -> Iterator[None]:
    """A test that leaves an entry on sys.path changes what later tests in the same worker import (the
    simulated torch_npu's site left there made liger-kernel take its NPU branch in another file): fail it."""
    before = list(sys.path)
    yield
    # a package's import adding its own vendored folder (setuptools/_vendor) is not the test's doing
    added = [p for p in sys.path if p not in before and not p.startswith(_SITE_PACKAGES)]
    if added:
        sys.path[:] = before
        pytest.fail(f"this test left {added} on sys.path: restore it (monkeypatch.syspath_prepend, or a child process)")
