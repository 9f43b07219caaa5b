// Linear-algebra results in CUDA's memory layout. The CPU's LAPACK kernels return some factors
// column-major where CUDA's (cuSOLVER, MAGMA) return them row-major, and PyTorch's meta functions —
// what torch.compile / AOTAutograd trace with — predict CUDA's layout for a cuda tensor. A compiled
// graph then holds view() calls that are valid only on CUDA's strides ("view size is not compatible
// with input tensor's size and stride" at run time: roma's compiled procrustes backward). So the
// device computes with the CPU kernel and hands back CUDA's layout (one copy of the factor).
//   _linalg_svd: Vh row-major (torch/_meta_registrations.py, _linalg_svd_meta)
//   linalg_eig:  eigenvectors row-major (meta_linalg_eig)
#include "call.h"

#include <ATen/ATen.h>
#include <torch/library.h>

namespace cudashim {
namespace {


std::tuple<at::Tensor, at::Tensor, at::Tensor> svd(const at::Tensor& A, bool full_matrices, bool compute_uv,
                                                   std::optional<c10::string_view> driver) {
  const auto index = A.device().index();
  auto [U, S, Vh] = at::_linalg_svd(host(A), full_matrices, compute_uv, driver);
  if (compute_uv) Vh = Vh.contiguous();
  return {as_device(std::move(U), index), as_device(std::move(S), index), as_device(std::move(Vh), index)};
}

// CUDA computes eig on the host (MAGMA's geev), so it synchronizes on every call; the table of
// synchronizing operators reaches only operators without a kernel of the device's own, as this one is
std::tuple<at::Tensor, at::Tensor> eig(const at::Tensor& A) {
  synchronizing("aten::linalg_eig");
  const auto index = A.device().index();
  auto [values, vectors] = at::linalg_eig(host(A));
  return {as_device(std::move(values), index), as_device(vectors.contiguous(), index)};
}

}  // namespace

void register_linalg() {
  static torch::Library m(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  kernel<&svd>(m, "_linalg_svd");
  kernel<&eig>(m, "linalg_eig");
}

}  // namespace cudashim
