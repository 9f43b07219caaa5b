"""Environment values are checked before user code; CUDA_VISIBLE_DEVICES on cpu follows CUDA's rules.
Issue 16: CUDASHIM_CPU_DEVICES=-1 / abc / 100000000000 / 0, CUDA_VISIBLE_DEVICES="" and garbage on cpu."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._trust import Trust, write

PROBE = ('print("USER CODE")\nimport torch\nprint(torch.cuda.is_available(), torch.cuda.device_count())\n'
         'try:\n    torch.ones(1, device="cuda")\n    print("tensor made")\nexcept RuntimeError as e:\n    print("refused:", e)\n')


def _run(trust: Trust, tmp: Path, **env: str) -> "tuple[int, str, str]":
    (tmp / ".git").mkdir(exist_ok=True)
    write(tmp / "app.py", PROBE)
    proc = trust.run(["--platform", "cpu", "app.py"], cwd=tmp, env=trust.env(**env), timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("value", ["-1", "abc", "100000000000", "65"])
def test_cpu_devices_out_of_range_stops_before_user_code(trust: Trust, tmp_path: Path, value: str) -> None:
    rc, out, err = _run(trust, tmp_path, CUDASHIM_CPU_DEVICES=value)
    assert rc == 2, out + err
    assert "USER CODE" not in out
    assert f"CUDASHIM_CPU_DEVICES={value!r}" in err and "Traceback" not in err, err


@pytest.mark.parametrize("value", ["100", "300"])
def test_local_world_size_past_the_cpu_devices_stops_before_user_code(trust: Trust, tmp_path: Path, value: str) -> None:
    """Without CUDASHIM_CPU_DEVICES the count comes from LOCAL_WORLD_SIZE: past the 64 devices the core
    has tables for, cuda:99 overran them (SIGSEGV) and 300 narrowed to 44 devices."""
    rc, out, err = _run(trust, tmp_path, LOCAL_WORLD_SIZE=value)
    assert rc == 2, out + err
    assert "USER CODE" not in out
    assert f"LOCAL_WORLD_SIZE={value}" in err and "CUDASHIM_CPU_DEVICES" in err and "Traceback" not in err, err


def test_cpu_devices_maximum_is_accepted(trust: Trust, tmp_path: Path) -> None:
    rc, out, err = _run(trust, tmp_path, CUDASHIM_CPU_DEVICES="64")
    assert rc == 0, err
    assert "True 64" in out


@pytest.mark.parametrize("env", [{"CUDASHIM_CPU_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": ""},
                                 {"CUDA_VISIBLE_DEVICES": "-1"}])
def test_no_device_means_no_cuda_tensor(trust: Trust, tmp_path: Path, env: dict[str, str]) -> None:
    rc, out, err = _run(trust, tmp_path, **env)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[1] == "False 0"
    assert lines[2].startswith("refused:"), out


def test_visible_devices_narrow_the_cpu_devices(trust: Trust, tmp_path: Path) -> None:
    rc, out, err = _run(trust, tmp_path, CUDASHIM_CPU_DEVICES="4", CUDA_VISIBLE_DEVICES="1,3")
    assert rc == 0, err
    assert out.splitlines()[1] == "True 2"


@pytest.mark.parametrize("value", ["garbage", "0,,1", "GPU-1234"])
def test_garbage_visible_devices_on_cpu_is_refused_with_the_value_named(trust: Trust, tmp_path: Path, value: str) -> None:
    rc, out, err = _run(trust, tmp_path, CUDA_VISIBLE_DEVICES=value)
    assert rc == 2, out + err
    assert "USER CODE" not in out
    assert f"CUDA_VISIBLE_DEVICES={value!r}" in err, err


def test_visible_device_beyond_the_cpu_devices_is_refused(trust: Trust, tmp_path: Path) -> None:
    rc, out, err = _run(trust, tmp_path, CUDASHIM_CPU_DEVICES="2", CUDA_VISIBLE_DEVICES="0,5")
    assert rc == 2, out + err
    assert "CUDA_VISIBLE_DEVICES='0,5'" in err and "CUDASHIM_CPU_DEVICES" in err, err


def test_a_variable_read_late_is_checked_before_user_code(trust: Trust, tmp_path: Path) -> None:
    rc, out, err = _run(trust, tmp_path, CUDASHIM_NCCL_NUM_SMS="lots")
    assert rc == 2, out + err
    assert "USER CODE" not in out and "CUDASHIM_NCCL_NUM_SMS='lots'" in err, err
