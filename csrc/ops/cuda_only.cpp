// Operators only CUDA implements, that programs call because their tensor is on `cuda`: the device
// computes what CUDA computes, with the CPU's kernels.
//   mm.dtype, mm.dtype_out: a matrix product of float16/bfloat16 matrices into a float32 result,
//   accumulated in float32 (cuBLAS's out_dtype=); linear_cross_entropy's chunked path takes it on
//   cuda. The device widens the factors (exact) and multiplies them in float32 with the CPU's kernel.
#include "call.h"

#include <ATen/ATen.h>
#include <torch/library.h>

namespace cudashim {
namespace {

at::Tensor mm_widened(const at::Tensor& self, const at::Tensor& mat2, at::ScalarType out_dtype) {
  TORCH_CHECK(self.dim() == 2, "self must be a matrix, got ", self.dim(), "-D tensor");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix, got ", mat2.dim(), "-D tensor");
  TORCH_CHECK(self.device() == mat2.device(), "Expected all tensors to be on the same device, but found at least two devices, ",
              self.device(), " and ", mat2.device(), "!");
  TORCH_CHECK(self.dtype() == mat2.dtype(), "input dtypes must be the same, got: ", self.dtype(), " and ", mat2.dtype());
  TORCH_CHECK(out_dtype == self.scalar_type() ||
                  (out_dtype == at::kFloat && (self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16)),
              "out_dtype must be the same as input dtype or fp32 for fp16/bf16 inputs");
  if (out_dtype == self.scalar_type()) return at::mm(host(self), host(mat2));
  return at::mm(host(self).to(out_dtype), host(mat2).to(out_dtype));
}

at::Tensor mm_dtype(const at::Tensor& self, const at::Tensor& mat2, at::ScalarType out_dtype) {
  return as_device(mm_widened(self, mat2, out_dtype), self.device().index());
}

at::Tensor& mm_dtype_out(const at::Tensor& self, const at::Tensor& mat2, at::ScalarType out_dtype, at::Tensor& out) {
  TORCH_CHECK(out_dtype == out.scalar_type(), "out_dtype must be the same as the dtype of the provided out tensor");
  TORCH_CHECK(out.device() == self.device(), "Expected all tensors to be on the same device, but found at least two devices, ",
              self.device(), " and ", out.device(), "!");
  const at::Tensor r = mm_widened(self, mat2, out_dtype);
  out.resize_(r.sizes());
  host(out).copy_(r);
  return out;
}

}  // namespace

// operators only CUDA has: the cuda device's alone (init() calls it for that device only)
void register_cuda_only() {
  if (!is_cuda()) return;
  static torch::Library m(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  kernel<&mm_dtype>(m, "mm.dtype");
  kernel<&mm_dtype_out>(m, "mm.dtype_out");
}

}  // namespace cudashim
