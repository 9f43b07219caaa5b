// What autocast asks of the device that the CPU kernels lack: CUDA's autocast runs softmax and
// log_softmax of float16/bfloat16 inputs in float32 (half_to_float), which the CPU kernels refuse.
// Here the input is widened first; the result is the same float32 softmax.
#include "shim.h"

#include <torch/library.h>

namespace cudashim {
namespace {

template <at::Tensor (*Op)(const at::Tensor&, int64_t, bool)>
at::Tensor widened(const at::Tensor& self, int64_t dim, bool half_to_float) {
  const auto index = self.device().index();
  at::Tensor out;
  {
    at::Tensor in = cpu_view(self, false);
    out = Op(half_to_float ? in.to(at::kFloat) : in, dim, false);
  }
  return as_device(out, index);
}

template <at::Tensor (*Op)(const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType)>
at::Tensor widened_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim, at::ScalarType input_dtype) {
  const auto index = grad.device().index();
  at::Tensor out;
  {
    at::Tensor g = cpu_view(grad, false);
    at::Tensor o = cpu_view(output, false);
    const bool widened = g.scalar_type() != input_dtype;
    out = Op(g, o, dim, widened ? g.scalar_type() : input_dtype);
    if (widened) out = out.to(input_dtype);
  }
  return as_device(out, index);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, CUDASHIM_KEY, m) {
  m.impl("_softmax", widened<&at::_softmax>);
  m.impl("_log_softmax", widened<&at::_log_softmax>);
  m.impl("_softmax_backward_data", widened_backward<&at::_softmax_backward_data>);
  m.impl("_log_softmax_backward_data", widened_backward<&at::_log_softmax_backward_data>);
}

}  // namespace cudashim
