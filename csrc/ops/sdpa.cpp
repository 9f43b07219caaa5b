// scaled_dot_product_attention on the device: the CPU's fused (flash) kernels instead of the unfused math
// path. PyTorch's SDPA picks a backend through a per-device-type stub that a CPU build leaves empty for
// CUDA and PrivateUse1 (so it would always fall to math, which materializes the whole score matrix, and
// round differently from the CPU); the device fills it with the CPU's own choice, and answers the CUDA
// flash operator and its backward with the CPU flash kernels on views of the same memory (under
// torch.compile the choice is asked with FakeTensors, see ask()). CUDA's flash operator takes no mask, and
// PyTorch's CUDA branch of SDPA drops attn_mask when it calls it; so when the CPU's choice is flash and
// there is a mask, the device answers "overrideable" instead, whose operator carries the mask, and runs
// the same CPU flash kernel with it (the CPU's own result, bit for bit).
#include "call.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/SDPBackend.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

namespace cudashim {
namespace {


// The choice reads only shapes, dtypes and flags. Under torch.compile the arguments are FakeTensors,
// whose memory must not be touched and whose sizes may be symbolic (dynamic shapes): the CPU's choice
// is asked with meta tensors of the same layout, which hold symbolic sizes as they are (a CPU tensor
// cannot), through the CPU's kernel of the choice (the meta operator answers "math" for any device).
at::Tensor ask(const at::Tensor& t, bool fake) {
  if (!fake) return host(t);
  at::Tensor p = at::empty_strided_symint(t.sym_sizes(), t.sym_strides(), t.options().device(c10::kMeta));
  if (t.requires_grad()) p.set_requires_grad(true);
  return p;
}

int64_t choose(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& mask,
               double dropout, bool causal, std::optional<double> scale, bool gqa) {
  const bool fake = q.key_set().has(c10::DispatchKey::Python);
  // asking the CPU is not part of the program: a tracing mode (AOTAutograd) must not record it
  c10::impl::ExcludeDispatchKeyGuard no_modes(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  std::optional<at::Tensor> m = mask.has_value() ? std::optional<at::Tensor>(ask(*mask, fake)) : std::nullopt;
  int64_t choice = 0;
  if (fake) {  // the CPU's kernel of the choice (its portable build: the choice reads no data)
    const auto cpu_choice = decltype(at::native::_fused_sdp_choice_stub)::DEFAULT;
    TORCH_INTERNAL_ASSERT(cpu_choice != nullptr, "cudashim: the CPU's SDPA choice is not registered");
    choice = cpu_choice(ask(q, true), ask(k, true), ask(v, true), m, dropout, causal, scale, gqa);
  } else {
    choice = at::_fused_sdp_choice(host(q), host(k), host(v), m, dropout, causal, scale, gqa);  // the CPU's
  }
  const auto flash_ = static_cast<int64_t>(at::SDPBackend::flash_attention);
  return choice == flash_ && m.has_value() ? static_cast<int64_t>(at::SDPBackend::overrideable) : choice;
}

// CUDA's flash operators return their output (and gradients) in the layout of their input and a
// contiguous logsumexp, as the meta functions torch.compile traces with say; the CPU kernels pick
// their own. Laid out as CUDA's, so compiled code that checks strides sees what it traced; copied
// only where the CPU's layout differs (a serve loop's transposed q already gets q's).
at::Tensor laid_out_like(at::Tensor got, const at::Tensor& input) {
  // the strides empty_like(input) gives: input's own when dense, else the dense ones in its order
  if (input.is_non_overlapping_and_dense() ? got.strides() == input.strides()
                                           : got.strides() == c10::IntArrayRef(at::infer_dense_strides(input.sizes(), input.strides()))) {
    return got;
  }
  return at::empty_like(input).copy_(got);
}

at::Tensor contiguous_lse(at::Tensor got) {
  if (got.is_contiguous()) return got;
  return at::empty(got.sizes(), got.options()).copy_(got);
}

// an output CUDA's operator returns and nothing here fills (the RNG state, the debug mask): made
// straight from the device's allocator, not through the dispatcher
at::Tensor unfilled(c10::IntArrayRef sizes, c10::ScalarType dtype, c10::DeviceIndex index) {
  return capture_note(at::detail::empty_generic(sizes, device_allocator(index), c10::DispatchKeySet(kKey), dtype,
                                                std::nullopt));
}

using Forward = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
                           at::Tensor, at::Tensor>;

// The CPU's flash kernel (with or without a mask) on views of the device tensors, its results in CUDA's
// layout, each output as the operator's meta function promises (what torch.compile traces and asserts):
// no cumulative sequence lengths; flash's RNG state as CUDA's flash returns it (philox seed pair and
// offset, uint64), overrideable's as its meta says (two int64 scalars) and no debug mask. Unused here.
Forward forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& mask,
                double dropout, bool causal, std::optional<double> scale, bool overrideable) {
  const auto index = q.device().index();
  std::optional<at::Tensor> m = mask.has_value() ? std::optional<at::Tensor>(host(*mask)) : std::nullopt;
  auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(host(q), host(k), host(v), dropout, causal, m, scale);
  at::Tensor seed = overrideable ? unfilled({}, at::kLong, index) : unfilled({2}, at::kUInt64, index);
  at::Tensor offset = unfilled({}, overrideable ? at::kLong : at::kUInt64, index);
  at::Tensor debug = overrideable ? at::Tensor() : unfilled({0}, q.scalar_type(), index);
  return {laid_out_like(as_device(std::move(out), index), q), contiguous_lse(as_device(std::move(lse), index)),
          at::Tensor(), at::Tensor(), c10::SymInt(q.size(2)), c10::SymInt(k.size(2)), seed, offset, debug};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& grad, const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                                        const at::Tensor& mask, double dropout, bool causal,
                                                        std::optional<double> scale) {
  const auto index = q.device().index();
  std::optional<at::Tensor> m = mask.defined() ? std::optional<at::Tensor>(host(mask)) : std::nullopt;
  auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      host(grad), host(q), host(k), host(v), host(out), host(lse), dropout, causal, m, scale);
  return {laid_out_like(as_device(std::move(dq), index), q), laid_out_like(as_device(std::move(dk), index), k),
          laid_out_like(as_device(std::move(dv), index), v)};
}

Forward flash(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout, bool causal,
              bool /*return_debug_mask*/, std::optional<double> scale) {
  return forward(q, k, v, std::nullopt, dropout, causal, scale, false);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_backward(
    const at::Tensor& grad, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor&, const at::Tensor&, c10::SymInt, c10::SymInt, double dropout, bool causal,
    const at::Tensor&, const at::Tensor&, std::optional<double> scale) {
  return backward(grad, q, k, v, out, lse, at::Tensor(), dropout, causal, scale);
}

Forward masked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& mask,
               double dropout, bool causal, bool /*return_debug_mask*/, std::optional<double> scale) {
  return forward(q, k, v, mask, dropout, causal, scale, true);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> masked_backward(
    const at::Tensor& grad, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
    std::array<bool, 4> need, const at::Tensor& out, const at::Tensor& lse, const at::Tensor&, const at::Tensor&,
    c10::SymInt, c10::SymInt, double dropout, bool causal, const at::Tensor&, const at::Tensor&,
    std::optional<double> scale) {
  TORCH_CHECK(!need[3], "scaled_dot_product_attention on the emulated CUDA device: no gradient for attn_mask "
              "(the CPU's flash kernel computes none); detach the mask, or pass it with requires_grad=False");
  auto [dq, dk, dv] = backward(grad, q, k, v, out, lse, mask, dropout, causal, scale);
  // the meta function promises a gradient shaped as the mask whenever there is one (asked for or not)
  return {dq, dk, dv, mask.defined() ? capture_note(at::empty_like(mask)) : at::Tensor()};
}

}  // namespace

void register_sdpa() {
  if (is_cuda()) {
    at::native::_fused_sdp_choice_stub.set_cuda_dispatch_ptr(&choose);
  } else {
    // the simulated NPU: the CPU's flash choice runs _scaled_dot_product_flash_attention_for_cpu,
    // whose npu tensors the fallback hands to the CPU kernel (torch_npu fills this stub natively)
    at::native::_fused_sdp_choice_stub.set_privateuse1_dispatch_ptr(&choose);
  }
  static torch::Library m(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  kernel<&flash>(m, "_scaled_dot_product_flash_attention");
  kernel<&flash_backward>(m, "_scaled_dot_product_flash_attention_backward");
  kernel<&masked>(m, "_scaled_dot_product_fused_attention_overrideable");
  kernel<&masked_backward>(m, "_scaled_dot_product_fused_attention_overrideable_backward");
}

}  // namespace cudashim
