// The hottest operators reach their CPU kernels unboxed: the same work as the boxed fallback
// (call.h: devices checked, CPU views of the arguments, outputs handed back), without packing the
// arguments into a stack of IValues and unpacking them again for the CPU kernel. A serve loop runs
// tens of thousands of small operators per generated batch, so this is most of what the device adds.
// Under CUDA graph capture they take the boxed fallback, which records them (graph.cpp).
#include "call.h"

#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/all_ops.h>
#include <ATen/ops/any_ops.h>
#include <ATen/ops/argmax_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/embedding_ops.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/isneginf_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/logical_not_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/where_ops.h>
#include <ATen/ops/zero_ops.h>
#include <torch/library.h>

#include <tuple>
#include <type_traits>

namespace cudashim {
namespace {

// the devices of the arguments (tensors only)
template <class T>
void see(Call& /*call*/, const T& /*arg*/) {}
void see(Call& call, const at::Tensor& t) { call.see(t); }
void see(Call& call, const std::optional<at::Tensor>& t) {
  if (t.has_value()) call.see(*t);
}

// what the CPU kernel receives for each argument
template <class T>
struct Pass {
  static T in(Call& /*call*/, T arg) { return static_cast<T>(arg); }
};
template <>
struct Pass<const at::Tensor&> {
  static const at::Tensor& in(Call& call, const at::Tensor& t) { return call.view(t); }
};
template <>
struct Pass<at::Tensor&> {  // an in-place operator's self: written through the view
  static at::Tensor& in(Call& call, at::Tensor& t) { return const_cast<at::Tensor&>(call.view(t, true)); }
};
template <>
struct Pass<const std::optional<at::Tensor>&> {
  static std::optional<at::Tensor> in(Call& call, const std::optional<at::Tensor>& t) {
    return t.has_value() ? std::optional<at::Tensor>(call.view(*t)) : std::nullopt;
  }
};

// what the caller receives
template <class R>
struct Back {
  static R out(const Call& /*call*/, R r) { return r; }
};
template <>
struct Back<at::Tensor> {
  static at::Tensor out(const Call& call, at::Tensor r) { return call.back(std::move(r)); }
};
template <class... T>
struct Back<std::tuple<T...>> {
  static std::tuple<T...> out(const Call& call, std::tuple<T...> r) {
    return std::apply([&](auto&... x) { return std::tuple<T...>(Back<T>::out(call, std::move(x))...); }, r);
  }
};

template <class First, class... Rest>
First& first(First& a, Rest&... /*rest*/) {
  return a;
}

template <class Op, class Signature>
struct Direct;

// the matrix products take the boxed fallback while the allocator model is on: it accounts for
// cuBLAS's workspaces (blas.cpp)
template <class Op>
constexpr bool kBlas = std::is_same_v<Op, at::_ops::mm> || std::is_same_v<Op, at::_ops::bmm> ||
                       std::is_same_v<Op, at::_ops::addmm>;

template <class Op, class R, class... A>
struct Direct<Op, R(A...)> {
  static R call(A... args) {
    if (C10_UNLIKELY(capturing() || (kBlas<Op> && model_active()) || npu_decides())) return boxed(args...);
    Call c;
    (see(c, args), ...);
    c.settle(false, Op::name);
    constexpr auto cpu = c10::DispatchKeySet(c10::DispatchKey::CPU);
    try {
      if constexpr (std::is_same_v<R, at::Tensor&>) {  // in place: the CPU kernel wrote through the view of self
        Op::redispatch(cpu, Pass<A>::in(c, args)...);
        return first(args...);
      } else {
        return Back<R>::out(c, Op::redispatch(cpu, Pass<A>::in(c, args)...));
      }
    } catch (const c10::Error& e) {
      host_refused(c.device, e);  // an output the host could not give: the device's out of memory
      throw;
    }
  }

  static const c10::OperatorHandle& handle() {
    static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return op;
  }

  // the simulated NPU: an operator torch_npu has no kernel for (or checks the dtypes of) takes the boxed
  // path, which decides as torch_npu does (npu_coverage.cpp); decided once, the table being set first
  static bool npu_decides() {
    if (C10_LIKELY(!npu_coverage_active())) return false;
    static const bool decides = npu_core_kernel(handle()) != NpuKernel::Plain;
    return decides;
  }

  static R boxed(A... args) {
    return c10::impl::BoxedKernelWrapper<R(A...)>::call(c10::BoxedKernel::makeFromFunction<&core_boxed>(), handle(),
                                                        c10::DispatchKeySet(kKey), args...);
  }
};

}  // namespace

#define CUDASHIM_DIRECT(m, op, name) m.impl(name, TORCH_FN((Direct<at::_ops::op, at::_ops::op::schema>::call)))

void register_direct() {
  static torch::Library m(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  CUDASHIM_DIRECT(m, add_Tensor, "add.Tensor");
  CUDASHIM_DIRECT(m, add__Tensor, "add_.Tensor");
  CUDASHIM_DIRECT(m, add_Scalar, "add.Scalar");
  CUDASHIM_DIRECT(m, sub_Tensor, "sub.Tensor");
  CUDASHIM_DIRECT(m, sub__Tensor, "sub_.Tensor");
  CUDASHIM_DIRECT(m, mul_Tensor, "mul.Tensor");
  CUDASHIM_DIRECT(m, mul__Tensor, "mul_.Tensor");
  CUDASHIM_DIRECT(m, mul_Scalar, "mul.Scalar");
  CUDASHIM_DIRECT(m, div_Tensor, "div.Tensor");
  CUDASHIM_DIRECT(m, div__Tensor, "div_.Tensor");
  CUDASHIM_DIRECT(m, div_Scalar, "div.Scalar");
  CUDASHIM_DIRECT(m, eq_Tensor, "eq.Tensor");
  CUDASHIM_DIRECT(m, eq_Scalar, "eq.Scalar");
  CUDASHIM_DIRECT(m, ne_Scalar, "ne.Scalar");
  CUDASHIM_DIRECT(m, lt_Scalar, "lt.Scalar");
  CUDASHIM_DIRECT(m, le_Scalar, "le.Scalar");
  CUDASHIM_DIRECT(m, gt_Scalar, "gt.Scalar");
  CUDASHIM_DIRECT(m, where_self, "where.self");
  CUDASHIM_DIRECT(m, masked_fill__Scalar, "masked_fill_.Scalar");
  CUDASHIM_DIRECT(m, masked_fill_Scalar, "masked_fill.Scalar");
  CUDASHIM_DIRECT(m, fill__Scalar, "fill_.Scalar");
  CUDASHIM_DIRECT(m, zero_, "zero_");
  CUDASHIM_DIRECT(m, neg, "neg");
  CUDASHIM_DIRECT(m, exp, "exp");
  CUDASHIM_DIRECT(m, rsqrt, "rsqrt");
  CUDASHIM_DIRECT(m, sigmoid, "sigmoid");
  CUDASHIM_DIRECT(m, tanh, "tanh");
  CUDASHIM_DIRECT(m, silu, "silu");
  CUDASHIM_DIRECT(m, isneginf, "isneginf");
  CUDASHIM_DIRECT(m, logical_not, "logical_not");
  CUDASHIM_DIRECT(m, pow_Tensor_Scalar, "pow.Tensor_Scalar");
  CUDASHIM_DIRECT(m, sum_dim_IntList, "sum.dim_IntList");
  CUDASHIM_DIRECT(m, mean_dim, "mean.dim");
  CUDASHIM_DIRECT(m, argmax, "argmax");
  CUDASHIM_DIRECT(m, all, "all");
  CUDASHIM_DIRECT(m, any_dim, "any.dim");
  CUDASHIM_DIRECT(m, mm, "mm");
  CUDASHIM_DIRECT(m, bmm, "bmm");
  CUDASHIM_DIRECT(m, addmm, "addmm");
  CUDASHIM_DIRECT(m, embedding, "embedding");
}

}  // namespace cudashim
