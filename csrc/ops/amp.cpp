// What autocast asks of the device that the CPU kernels lack: CUDA's autocast runs softmax and
// log_softmax of float16/bfloat16 inputs in float32 (half_to_float), which the CPU kernels refuse.
// Here the input is widened first; the result is the same float32 softmax.
//
// Serving PrivateUse1 (the simulated NPU), the core also registers autocast for its device: torch
// registers AutocastCUDA's kernels itself but leaves AutocastPrivateUse1 empty (every operator would
// fail under `torch.autocast("npu")`), and torch_npu fills it natively. Here it is filled with
// torch's own op lists and cast policies (autocast_mode.h), the ones AutocastCUDA uses.
#include "call.h"

#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace cudashim {
namespace {

template <at::Tensor (*Op)(const at::Tensor&, int64_t, bool)>
at::Tensor widened(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (C10_UNLIKELY(capturing())) {  // CUDA graph capture (graph.cpp): recorded, run through this kernel
    return capture_call(Op == &at::_softmax ? "aten::_softmax" : "aten::_log_softmax", {self, dim, half_to_float});
  }
  const auto index = self.device().index();
  at::Tensor out;
  {
    at::Tensor in = cpu_view(self, false);
    out = Op(half_to_float ? in.to(at::kFloat) : in, dim, false);
  }
  return as_device(std::move(out), index);
}

template <at::Tensor (*Op)(const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType)>
at::Tensor widened_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim, at::ScalarType input_dtype) {
  if (C10_UNLIKELY(capturing())) {
    return capture_call(Op == &at::_softmax_backward_data ? "aten::_softmax_backward_data"
                                                          : "aten::_log_softmax_backward_data",
                        {grad, output, dim, input_dtype});
  }
  const auto index = grad.device().index();
  at::Tensor out;
  {
    at::Tensor g = cpu_view(grad, false);
    at::Tensor o = cpu_view(output, false);
    const bool widened = g.scalar_type() != input_dtype;
    out = Op(g, o, dim, widened ? g.scalar_type() : input_dtype);
    if (widened) out = out.to(input_dtype);
  }
  return as_device(std::move(out), index);
}

// the simulated NPU's autocast policy (torch registers CUDA's itself, in every build)
void register_npu_autocast() {
  static torch::Library every(torch::Library::IMPL, "_", c10::DispatchKey::AutocastPrivateUse1, __FILE__, __LINE__);
  every.fallback(torch::CppFunction::makeFallthrough());  // an operator without a cast policy runs as it is
  static torch::Library m(torch::Library::IMPL, "aten", c10::DispatchKey::AutocastPrivateUse1, __FILE__, __LINE__);
  using at::IntArrayRef, at::Scalar, at::ScalarType, at::Tensor;  // the op lists' signatures name them bare
#define CUDASHIM_LOW(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define CUDASHIM_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define CUDASHIM_FP32_OPT(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define CUDASHIM_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(CUDASHIM_LOW)
  AT_FORALL_FP32(CUDASHIM_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(CUDASHIM_FP32_OPT)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(CUDASHIM_PROMOTE)
#undef CUDASHIM_LOW
#undef CUDASHIM_FP32
#undef CUDASHIM_FP32_OPT
#undef CUDASHIM_PROMOTE
}

}  // namespace

void register_amp() {
  static torch::Library m(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  kernel<&widened<&at::_softmax>, Capture::Itself>(m, "_softmax");
  kernel<&widened<&at::_log_softmax>, Capture::Itself>(m, "_log_softmax");
  kernel<&widened_backward<&at::_softmax_backward_data>, Capture::Itself>(m, "_softmax_backward_data");
  kernel<&widened_backward<&at::_log_softmax_backward_data>, Capture::Itself>(m, "_log_softmax_backward_data");
  if (!is_cuda()) register_npu_autocast();
}

}  // namespace cudashim
