"""The aten operators only CUDA implements (a CUDA kernel, no CPU or composite one: native_functions.yaml,
listed in cuda_only_ops.json by scripts/cuda_only_ops.py) on the emulated cuda device.

Without a kernel of the device's own such an operator reaches the device's fallback, which runs the
CPU's kernel, and the CPU has none: the program read "Could not run 'aten::X' with arguments from the
'CPU' backend", the CPU's words about a call the program made on cuda. Each now has one of:

  * a kernel of the native core's (csrc/ops: the fused RNN cells, SDPA's flash pair, mm's out_dtype, …),
  * a kernel here, written with the device's own operators, with CUDA's outputs as the operator's meta
    function states them (the layout torch.compile traces): flash and memory-efficient attention, dense
    and variable-length, with their log-sum-exp and RNG state, and their backward. Built of device
    operators, so a CUDA graph capture records each part and a replay recomputes it on new inputs,
  * or a CapabilityError naming the operator, what it is and the way out (REFUSED).

The attention kernels compute in float32 over the whole score matrix, masked as CUDA's kernels mask
(variable-length sequences as one block-diagonal matrix, so no sequence length is read on the host
and the call stays capturable): CUDA's results to rounding, not its memory use or speed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

__all__ = ["KERNELS", "CORE_KERNELS", "REFUSED", "listed", "union", "decision", "register"]

_LIST = Path(__file__).with_name("cuda_only_ops.json")

# implemented here (Python, over device operators)
KERNELS = {
    "_flash_attention_forward": "flash attention (dense and variable-length), log-sum-exp and RNG state as CUDA's",
    "_flash_attention_backward": "flash attention's gradients from its log-sum-exp",
    "_flash_attention_forward_no_dropout_inplace": "flash attention into a given output (varlen_attn_out)",
    "_efficient_attention_forward": "memory-efficient attention (bias, causal masks, variable-length), its padded log-sum-exp",
    "_efficient_attention_backward": "memory-efficient attention's gradients (and the bias's)",
    "_scaled_dot_product_efficient_attention": "SDPA's memory-efficient operator over _efficient_attention_forward",
    "_scaled_dot_product_efficient_attention_backward": "its backward over _efficient_attention_backward",
    "_fused_rms_norm_backward": "CUDA's fused RMSNorm backward (F.rms_norm's gradient on cuda), torch's own formula",
}

# implemented by the native core (csrc/ops), file named
CORE_KERNELS = {
    "mm.dtype": "csrc/ops/cuda_only.cpp", "mm.dtype_out": "csrc/ops/cuda_only.cpp",
    "_thnn_fused_lstm_cell": "csrc/ops/rnn.cpp", "_thnn_fused_lstm_cell_backward_impl": "csrc/ops/rnn.cpp",
    "_thnn_fused_gru_cell": "csrc/ops/rnn.cpp", "_thnn_fused_gru_cell_backward": "csrc/ops/rnn.cpp",
    "_scaled_dot_product_flash_attention": "csrc/ops/sdpa.cpp",
    "_scaled_dot_product_flash_attention_backward": "csrc/ops/sdpa.cpp",
    "record_stream": "csrc/ops/kernels.cpp",
    "_use_cudnn_ctc_loss": "csrc/ops/fallback.cpp (answers no: the CPU's path)",
    "_use_cudnn_ctc_loss.Tensor": "csrc/ops/fallback.cpp (answers no: the CPU's path)",
    "_use_miopen_ctc_loss": "csrc/ops/fallback.cpp (answers no: the CPU's path)",
    "_use_miopen_ctc_loss.Tensor": "csrc/ops/fallback.cpp (answers no: the CPU's path)",
}

# the refused, by name prefix (the first that matches): what the operator is, and the way out
REFUSED: list[tuple[str, str]] = [
    ("_cudnn_attention", "cuDNN's attention; call scaled_dot_product_attention (the device picks its kernel), or "
                         "varlen_attn, which takes flash attention on the device"),
    ("_cudnn_ctc_loss", "cuDNN's CTC loss; call F.ctc_loss, which asks _use_cudnn_ctc_loss (no on the device)"),
    ("_cudnn_rnn", "cuDNN's RNN; call nn.LSTM / nn.GRU / nn.RNN, which take the device's RNN path"),
    ("_cudnn_init_dropout_state", "cuDNN's RNN dropout state; call nn.LSTM / nn.GRU with dropout"),
    ("cudnn_", "a cuDNN kernel; call the operator's public form (conv2d, batch_norm, grid_sample, affine_grid), "
               "which takes the device's path"),
    ("miopen_", "a MIOpen (ROCm) kernel, absent from a CUDA build's cuda path too; call the public operator"),
    ("_use_miopen", "a MIOpen predicate"),
    ("_fused_dropout", "the legacy fused dropout; call F.dropout (native_dropout on the device)"),
    ("_masked_scale", "the legacy fused dropout's scale; call F.dropout"),
    ("_fill_mem_eff_dropout_mask_", "memory-efficient attention's dropout mask (Philox, CUDA's generator "
                                    "layout); attention dropout runs on the device through SDPA's math path"),
    ("_triton_", "a Triton attention kernel of CUDA's build; call scaled_dot_product_attention"),
    ("_flash_attention_forward.quantized", "FP8 flash attention; dequantize and call _flash_attention_forward"),
    ("_scaled_dot_product_flash_attention.quantized", "FP8 flash attention; dequantize and call SDPA"),
    ("_scaled_dot_product_cudnn_attention", "cuDNN's SDPA operator; call scaled_dot_product_attention"),
    ("_cslt_", "cuSPARSELt's 2:4 sparse matrix product; keep the weight dense (to_dense()) on the device"),
    ("_sparse_semi_structured", "CUTLASS's 2:4 sparse kernels; keep the weight dense on the device"),
    ("_to_sparse_semi_structured", "2:4 sparse compression (CUTLASS); keep the weight dense on the device"),
    ("_scaled_addmm", "cuBLASLt's FP8 scaled addmm; dequantize the factors and call addmm"),
    ("_mixed_dtypes_linear", "CUTLASS's mixed-dtype linear; dequantize the weight and call F.linear"),
    ("_scaled_grouped_mm", "FP8 grouped matrix products (CUTLASS/cuBLASLt); dequantize and call torch._grouped_mm"),
    ("_convert_weight_to_int4pack", "tinygemm's int4 packing (a GPU layout); call the _for_cpu variant on a CPU tensor"),
    ("_weight_int4pack_mm", "tinygemm's int4 matrix product; call _weight_int4pack_mm_for_cpu on CPU tensors"),
    ("batch_norm_", "SyncBatchNorm's CUDA kernels; convert the model's SyncBatchNorm to BatchNorm "
                    "(nn.SyncBatchNorm has no CPU path either) or average statistics with all_reduce"),
    ("_philox_", "CUDA's Philox key operators (torch.func random keys); draw with the device's generator"),
    ("_conv_depthwise2d", "CUDA's depthwise convolution; call F.conv2d with groups=channels (the device's path)"),
    ("conv_depthwise3d", "CUDA's depthwise 3-D convolution; call F.conv3d with groups=channels"),
    ("baddbmm.dtype", "cuBLAS's out_dtype product; widen the factors with .float() and call baddbmm"),
    ("bmm.dtype", "cuBLAS's out_dtype product; widen the factors with .float() and call bmm"),
    ("addmm.dtype", "cuBLAS's out_dtype product; widen the factors with .float() and call addmm"),
]


def union(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every operator some supported release lists, in the newest release's order then older ones' (name.overload,
    the keys of the newest release listing it, and the releases that list it)."""
    rows: dict[str, dict[str, Any]] = {}
    for release, entry in reversed(list(data["releases"].items())):
        for r in entry["operators"]:
            rows.setdefault(r["op"], {"op": r["op"], "keys": r["keys"], "releases": []})["releases"].insert(0, release)
    return list(rows.values())


def listed() -> list[dict[str, Any]]:
    """The generated list (cuda_only_ops.json): each operator only CUDA implements in some supported torch
    release, with its dispatch keys; register skips those the installed torch does not have."""
    return union(json.loads(_LIST.read_text()))


def decision(op: str) -> tuple[str, str]:
    """What the device does for one listed operator: ("kernel", where) or ("refused", the way out)."""
    if op in KERNELS:
        return "kernel", "cudashim/emulated/cuda_only.py: " + KERNELS[op]
    if op in CORE_KERNELS:
        return "kernel", CORE_KERNELS[op]
    for prefix, why in REFUSED:
        if op.startswith(prefix):
            return "refused", why
    return "refused", "no kernel on the device"


def _refusal(op: str, why: str) -> Callable[..., Any]:
    from ..errors import CapabilityError

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise CapabilityError(f"aten::{op} is an operator only CUDA implements and the emulated cuda device does "
                              f"not: {why}")

    return refuse


_libs: list[Any] = []


def _stands_in_for_torch_cuda(torch: Any, qualified: str) -> bool:
    """On a CUDA build of torch, csrc/ops/torch_cuda.cpp put the device's fallback where torch's CUDA
    backend had a kernel; for an operator only CUDA runs, that fallback would answer in the CPU's words,
    so the operator's kernel or refusal here takes its place."""
    for line in torch._C._dispatch_dump(qualified).splitlines():
        if line.startswith("CUDA: registered at "):
            return "torch_cuda.cpp" in line
    return False


def register(torch: Any) -> None:
    """Give every listed operator this torch has, and no kernel of the device's key, its kernel or its
    refusal (the core's kernels are registered first and kept)."""
    if _libs:
        return
    lib = torch.library.Library("aten", "IMPL")
    _libs.append(lib)
    from . import cuda_only_kernels as k

    impls = {"_flash_attention_forward": k.flash_forward, "_flash_attention_backward": k.flash_backward,
             "_flash_attention_forward_no_dropout_inplace": k.flash_forward_into,
             "_efficient_attention_forward": k.efficient_forward,
             "_efficient_attention_backward": k.efficient_backward,
             "_scaled_dot_product_efficient_attention": k.sdpa_efficient,
             "_scaled_dot_product_efficient_attention_backward": k.sdpa_efficient_backward,
             "_fused_rms_norm_backward": k.fused_rms_norm_backward}
    for row in listed():
        op = row["op"]
        name, _, overload = op.partition(".")
        packet = getattr(torch.ops.aten, name, None)
        if packet is None or (overload or "default") not in packet.overloads():
            continue  # another release's operator
        qualified = f"aten::{op}"
        if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CUDA") and not _stands_in_for_torch_cuda(
                torch, qualified):
            continue  # the native core's own
        what, why = decision(op)
        lib.impl(op, impls[op] if what == "kernel" and op in impls else _refusal(op, why), "CUDA")
