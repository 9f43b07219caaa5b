"""Peak dense BF16 throughput per chip: the MFU denominator engines report against, not a limit.

A table of (device-name pattern, TFLOPS, source), read by the Platform contract's
`bf16_tflops_limit()` and by `cudashim doctor`; the device's name comes from cudashim.hardware (NVML,
procfs, sysfs), never from a device context.
"""

from __future__ import annotations

__all__ = ["BF16_TFLOPS", "bf16_tflops_for", "first_device_name"]


# Dense (no sparsity) BF16 peak per chip, in TFLOPS: the MFU denominator, not a limit on anything.
# (pattern matched against the device name, value, source). First match wins, so specific names come first.
# Datasheets quote "with sparsity" figures; dense is half of those.
BF16_TFLOPS: tuple[tuple[str, float, str], ...] = (
    (r"\bGB200\b", 2500.0, "NVIDIA GB200 NVL72 datasheet: 5 PFLOPS sparse FP16/BF16 per GPU, halved"),
    (r"\bB200\b", 2250.0, "NVIDIA HGX B200 datasheet: 36 PFLOPS sparse FP16/BF16 per 8 GPUs, halved"),
    (r"\bH100\b.*\bPCIe\b", 756.0, "NVIDIA H100 datasheet, PCIe: 1,513 TFLOPS sparse BF16, halved"),
    (r"\bH100\b.*\bNVL\b", 835.0, "NVIDIA H100 datasheet, NVL: 1,671 TFLOPS sparse BF16, halved"),
    (r"\bH(100|200|800)\b", 989.0, "NVIDIA H100/H200 SXM datasheets: 1,979 TFLOPS sparse BF16, halved"),
    (r"\bH20\b", 148.0, "NVIDIA H20 product brief: 148 TFLOPS dense BF16"),
    (r"\bA(100|800)\b", 312.0, "NVIDIA A100 datasheet: 312 TFLOPS dense BF16"),
    (r"\bL40S\b", 362.0, "NVIDIA L40S datasheet: 733 TFLOPS sparse BF16, halved"),
    # No Huawei datasheet figure we could check; 432 is the constant DeepInfer's device.py uses for the
    # Ascend 950 MFU denominator (see the reference notes). Other Ascend chips: unknown -> None.
    (r"\bAscend\s*950", 432.0, "DeepInfer get_bf16_tflops_limit() constant for Ascend 950 (not a datasheet)"),
)


def bf16_tflops_for(device_name: str | None) -> float | None:
    """Dense BF16 peak of the named chip from BF16_TFLOPS; None when unknown (MFU stats then switch off)."""
    if not device_name:
        return None
    import re

    for pattern, value, _source in BF16_TFLOPS:
        if re.search(pattern, device_name, re.IGNORECASE):
            return value
    return None


def first_device_name(kind: str, root: str | None = None) -> str | None:
    """The first device's name from cudashim.hardware (NVML / procfs / sysfs), never from a device context."""
    try:
        from .. import hardware

        if kind == "nvidia":
            gpus = hardware.discover_gpus(root)
            return gpus[0].name if gpus else None
        if kind == "ascend":
            from ..hardware import ascend

            # only Ascend 950-class (UB) systems expose devices under /sys/class/ubcore; davinci-only
            # nodes (910B and older) carry no chip name we can read without the runtime
            return "Ascend 950" if ascend.ubcore_entries(root) else None
    except Exception:  # a probe failing only means "unknown peak"
        return None
    return None
