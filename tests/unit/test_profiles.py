"""Device profiles as data (cudashim/emulated/profiles/*.toml): the shipped set, a user's own file,
and the errors that name a bad one. No torch: profiles are read before the device exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudashim.emulated import profiles

WANTED = {"a100-40gb", "a100-80gb", "h100-80gb", "h200", "l40s", "rtx4090", "b200",
          "ascend910b2", "ascend910b3", "ascend910b4"}


def test_the_shipped_profiles_load() -> None:
    assert WANTED <= set(profiles.names())
    h200 = profiles.load("h200")
    assert (h200.device, h200.name, h200.get("major"), h200.get("minor"), h200.get("multi_processor_count")) == \
        ("cuda", "NVIDIA H200", 9, 0, 132)
    assert profiles.load("ascend910b4").device == "npu"
    for name in profiles.names():
        p = profiles.load(name)
        assert p.total_memory > 16 * 2**30 and p.name, name


def test_a_users_own_file(tmp_path: Path) -> None:
    f = tmp_path / "my-gpu.toml"
    f.write_text('device = "cuda"\nname = "My GPU"\nmajor = 12\nminor = 0\ntotal_memory = 1073741824\n'
                 "multi_processor_count = 7\n")
    p = profiles.load(str(f))
    assert (p.name, p.total_memory, p.get("major"), p.key) == ("My GPU", 2**30, 12, str(f))
    assert profiles.active("cuda", {"CUDASHIM_PROFILE": str(f)}) == p
    assert profiles.active("cuda", {}) is None


@pytest.mark.parametrize("body, says", [
    ('device = "gpu"\nname = "x"\ntotal_memory = 1\n', "`device` is 'gpu'"),
    ('device = "cuda"\nname = "x"\nmajor = 9\nminor = 0\nmulti_processor_count = 1\n', "`total_memory` is None"),
    ('device = "cuda"\nname = "x"\ntotal_memory = 1\nmajor = 9\nminor = 0\n', "`multi_processor_count` is missing"),
    ('device = "npu"\nname = "x"\ntotal_memory = 1\nsms = 3\n', "`sms` is not a property cudashim presents for npu"),
    ('device = "npu"\nname = "x"\ntotal_memory = 1\ncube_core_num = "24"\n', "`cube_core_num` is '24'"),
    ('device = "npu"\nname = \n', "cannot be read as TOML"),
])
def test_a_bad_file_is_named_with_the_fix(tmp_path: Path, body: str, says: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(profiles.ProfileError) as e:
        profiles.load(str(f))
    assert str(f) in str(e.value) and says in str(e.value), str(e.value)


def test_unknown_names_and_wrong_devices_are_refused() -> None:
    with pytest.raises(profiles.ProfileError, match="'h900' is not one cudashim ships; use one of: a100-40gb"):
        profiles.load("h900")
    with pytest.raises(profiles.ProfileError, match="no such file"):
        profiles.load("/nowhere/gpu.toml")
    with pytest.raises(profiles.ProfileError, match=r"is a cuda profile \(NVIDIA H200\); the simulated Ascend NPU "
                                                    "takes one of: ascend910b2"):
        profiles.active("npu", {"CUDASHIM_PROFILE": "h200"})
