// Which device calls reach cuBLAS on a GPU, for the allocator model's workspaces (allocator.cpp,
// blas_call): PyTorch's CUDA matrix products take the thread's cuBLAS handle, and the first use of a
// handle on a stream allocates its workspace from the caching allocator; addmm with a bias the
// cuBLASLt epilogue can fuse (Blas.cpp's isInputCompliesAddmmCudaLt) also takes cuBLASLt's. A call
// with an empty result or an empty reduction launches no BLAS at all.
#include "shim.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

namespace cudashim {
namespace {

enum Kind : int { kNone = -1, kPlain = 0, kLtIfBias = 1, kLtActivation = 2 };

Kind kind_of(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static std::unordered_map<const c10::FunctionSchema*, Kind> kinds;
  const c10::FunctionSchema* s = &op.schema();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = kinds.find(s);
  if (it != kinds.end()) return it->second;
  const std::string& name = s->name();
  const std::string& overload = s->overload_name();
  Kind k = kNone;
  if (name == "aten::mm" || name == "aten::bmm" || name == "aten::baddbmm" || name == "aten::addbmm" ||
      name == "aten::mv" || name == "aten::addmv" || name == "aten::dot" || name == "aten::vdot") {
    k = kPlain;
  } else if (name == "aten::addmm") {
    k = overload == "" || overload == "out" ? kLtIfBias : kPlain;  // addmm_ writes self: no Lt
  } else if (name == "aten::_addmm_activation") {
    k = kLtActivation;
  }
  kinds.emplace(s, k);
  return k;
}

bool lt_disabled() {
  static const bool off = [] {
    const char* v = std::getenv("DISABLE_ADDMM_CUDA_LT");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return off;
}

bool lt_dtype(c10::ScalarType t) {
  return t == at::kDouble || t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

// addmm(self, mat1, mat2, beta, alpha[, out]) through cuBLASLt, as CUDA's Blas.cpp decides
bool addmm_lt(const std::vector<c10::IValue>& stack, size_t base, bool activation) {
  const at::Tensor& self = stack[base].toTensor();
  const at::Tensor& mat1 = stack[base + 1].toTensor();
  const at::Tensor& mat2 = stack[base + 2].toTensor();
  if (lt_disabled() || mat1.dim() != 2 || mat2.dim() != 2) return false;
  if (stack[base + 3].toScalar().toComplexDouble() != 1.0) return false;
  const bool bias = self.is_contiguous() && (self.dim() == 1 || self.squeeze().dim() == 1) &&
                    self.dim() >= 1 && self.sizes().back() == mat2.size(1);
  const bool bias2d = activation && self.dim() == 2 && at::is_expandable_to(self.sizes(), {mat1.size(0), mat2.size(1)});
  return (bias || bias2d) && lt_dtype(mat1.scalar_type()) && mat1.size(0) > 1 && mat1.size(1) > 1 && mat2.size(0) > 1 &&
         mat2.size(1) > 1;
}

}  // namespace

int blas_kind(const c10::OperatorHandle& op, const std::vector<c10::IValue>& stack) {
  const Kind k = kind_of(op);
  if (k == kNone) return -1;
  const size_t n = op.schema().arguments().size();
  const size_t base = stack.size() - n;
  for (size_t i = base; i < stack.size(); ++i) {  // empty operands: no BLAS call (the out= result aside)
    if (stack[i].isTensor() && stack[i].toTensor().defined() && stack[i].toTensor().numel() == 0 &&
        !op.schema().arguments()[i - base].is_out()) {
      return -1;
    }
  }
  if (k == kPlain) return 0;
  if (op.schema().overload_name() == "out") {
    const at::Tensor& out = stack.back().toTensor();
    if (out.is_same(stack[base].toTensor()) || (out.numel() > 0 && (out.dim() != 2 || !out.is_contiguous()))) return 0;
  }
  return addmm_lt(stack, base, k == kLtActivation) ? 1 : 0;
}

}  // namespace cudashim
