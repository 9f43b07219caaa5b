// torch.distributed's collectives (the c10d:: operators) on device tensors, over the CPU backend.
//
// c10d dispatches each collective on its tensors' key; a CPU build registers CUDA kernels for them
// that hand the tensors to the process group's CUDA backend, which Gloo cannot serve (it crashes).
// The device replaces those kernels with one that views the device tensors as CPU tensors over the
// same memory and runs the CPU kernel: Gloo reads and writes the device memory in place, and the
// collective's returned tensors are the caller's own. This covers DDP's reducer and every Python
// collective alike. The replacement is registered with torch's "overriding a kernel" warning muted.
#include "shim.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>

namespace cudashim {
namespace {

struct Viewed {
  at::Tensor view, original;
};
using Views = std::vector<Viewed>;

c10::IValue to_host(const c10::IValue& v, Views& views) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.device().type() != kType) return v;
    at::Tensor view = cpu_view(t);
    views.push_back({view, t});
    return view;
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(to_host(t, views).toTensor());
    return out;
  }
  if (v.isList()) {  // Tensor[][] (allgather's outputs)
    auto in = v.toList();
    c10::impl::GenericList out(in.elementType());
    for (const c10::IValue& e : in) out.push_back(to_host(e, views));
    return out;
  }
  return v;
}

c10::IValue back(const c10::IValue& v, const Views& views) {
  if (v.isTensor()) {
    for (const auto& w : views) {
      if (w.view.unsafeGetTensorImpl() == v.toTensor().unsafeGetTensorImpl()) return w.original;
    }
    return v;
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(back(t, views).toTensor());
    return out;
  }
  if (v.isList()) {
    auto in = v.toList();
    c10::impl::GenericList out(in.elementType());
    for (const c10::IValue& e : in) out.push_back(back(e, views));
    return out;
  }
  return v;
}

void hosted(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (C10_UNLIKELY(capturing()) && capture_boxed(op, stack)) return;  // CUDA graph capture (graph.cpp)
  const size_t n = op.schema().arguments().size();
  const size_t base = stack->size() - n;
  Views views;
  for (size_t i = base; i < stack->size(); ++i) (*stack)[i] = to_host((*stack)[i], views);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  const size_t m = op.schema().returns().size();
  for (size_t i = stack->size() - m; i < stack->size(); ++i) (*stack)[i] = back((*stack)[i], views);
}

struct Mute final : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

}  // namespace

void register_collectives() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return;
  static Mute mute;
  c10::WarningUtils::WarningHandlerGuard quiet(&mute);  // "Overriding a previously registered kernel"
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "c10d", kKey, __FILE__, __LINE__);
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("c10d::", 0) != 0) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || !handle->hasKernelForDispatchKey(kKey)) continue;
    const std::string op = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib->impl(op.c_str(), torch::CppFunction::makeFromBoxedFunction<&hosted>());
  }
}

}  // namespace cudashim
