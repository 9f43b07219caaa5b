"""On an NVIDIA machine: PlatformGPU's host pinning, NCCL options and peak lookup on the real driver.

Run on the H200 box with:  python3 -m pytest -q tests/gpu/test_platform_gpu.py -rs -s
(or plainly: python3 tests/gpu/test_platform_gpu.py)
"""

from __future__ import annotations

import warnings

import pytest


pytestmark = pytest.mark.gpu


@pytest.fixture()
def gpu():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("this torch build sees no CUDA device")
    from cudashim.platform.contract import PlatformGPU

    return PlatformGPU()


def test_pin_and_unpin_existing_host_memory(gpu):
    import torch

    t = torch.empty(1 << 20, dtype=torch.uint8)  # pageable: allocated by the CPU allocator
    assert not t.is_pinned()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any failure code would warn: make it fail the test
        gpu.pin_host_memory(t)
        assert t.is_pinned()
        gpu.pin_host_memory(t)  # twice: cudaErrorHostMemoryAlreadyRegistered is benign
        # a pinned buffer copies asynchronously and correctly
        t.copy_(torch.arange(1 << 20, dtype=torch.int64).remainder(251).to(torch.uint8))
        d = t.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
        assert torch.equal(d.cpu(), t)
        gpu.unpin_host_memory(t.data_ptr())
        assert not t.is_pinned()
        gpu.unpin_host_memory(t.data_ptr())  # twice: cudaErrorHostMemoryNotRegistered is benign


def test_nccl_options_pin_ctas_and_build_a_group(gpu, monkeypatch):
    import torch
    import torch.distributed as dist

    monkeypatch.setenv("CUDASHIM_NCCL_NUM_SMS", "16")
    opts = gpu.get_distributed_options()
    assert (opts.config.min_ctas, opts.config.max_ctas) == (16, 16)
    torch.cuda.set_device(0)
    dist.init_process_group(gpu.distributed_backend, store=dist.HashStore(), rank=0, world_size=1, pg_options=opts)
    try:
        t = torch.ones(4, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        assert dist.get_backend() == "nccl" and t.tolist() == [1.0] * 4
    finally:
        dist.destroy_process_group()


def test_peak_from_the_nvml_name(gpu):
    import torch

    name = torch.cuda.get_device_name(0)
    from cudashim.platform.peak import bf16_tflops_for

    assert gpu.bf16_tflops_limit() == bf16_tflops_for(name)
    if "H200" in name:
        assert gpu.bf16_tflops_limit() == 989.0


if __name__ == "__main__":
    raise SystemExit(pytest.main(["-q", "-rs", "-s", __file__]))
