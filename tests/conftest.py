"""What every test folder shares: helper modules on the path, the tiers as markers, the one `gpu` skip.

- tests/fixtures holds the shared helpers (hwtrees, hwtest, replacements_ref, nvidia_gpu); pyproject's
  `pythonpath` puts it on sys.path, so test files import them by name (no sys.path edits).
- Tiers are markers: `gpu` (an NVIDIA GPU; skipped without one, written once below), `subprocess`
  (fresh interpreters: tests/subprocess, tests/hooks, tests/trust), `ascend_contract` (tests/ascend: the alias
  layer over the real torch_npu sources), `slow`. `python -m pytest -m subprocess` runs one tier.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nvidia_gpu import has_nvidia_gpu

__all__ = ["has_nvidia_gpu", "REPO"]

REPO = Path(__file__).resolve().parents[1]

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
