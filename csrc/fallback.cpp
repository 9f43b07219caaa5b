// Every other operator: PyTorch's CPU kernel, run on CPU views of the device tensors' memory.
//
// Unlike at::native::cpu_fallback nothing is copied: inputs are viewed in place, in-place and out=
// arguments are written in place, and the memory a CPU kernel allocates for its outputs becomes
// device memory (adopted into the device's statistics), handed back as device tensors. Before that, the
// devices are checked as a GPU checks them, and a random operator without a generator draws from
// the device's own generator.
#include "shim.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <memory>

namespace cudashim {
namespace {

struct Viewed {
  at::Tensor view;  // held until the outputs are sorted out
  at::Tensor original;
};

// operators a GPU runs with CPU tensors among their arguments (indices may live on the host)
bool mixes_devices(const c10::OperatorName& name) {
  const auto& n = name.name;
  return n == "aten::index" || n == "aten::index_put_" || n == "aten::_index_put_impl_" || n == "aten::index_put";
}

struct Scan {
  c10::DeviceIndex device = -1;
  bool host_tensor = false;  // a CPU tensor with dimensions among the arguments
  void see(const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().type() == kType) {
      const auto i = t.device().index();
      TORCH_CHECK(device < 0 || device == i, "Expected all tensors to be on the same device, but found at least two devices, ",
                  c10::Device(kType, device), " and ", c10::Device(kType, i), "!");
      device = i;
    } else if (t.dim() > 0) {
      host_tensor = true;
    }
  }
};

at::Tensor to_cpu(const at::Tensor& t, c10::SmallVector<Viewed, 8>& viewed) {
  if (!t.defined() || t.device().type() != kType) return t;
  at::Tensor v = cpu_view(t);
  viewed.push_back({v, t});
  return v;
}

bool is_generator_slot(const c10::Argument& a) {
  const auto& type = a.type();
  if (type->kind() != c10::TypeKind::OptionalType) return false;
  return type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

at::Tensor back(const at::Tensor& t, c10::DeviceIndex device, const c10::SmallVector<Viewed, 8>& viewed) {
  if (!t.defined() || t.device().type() == kType) return t;
  for (const auto& v : viewed) {
    if (v.view.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return v.original;  // in-place / out=: the argument itself
  }
  return as_device(t, device);
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (C10_UNLIKELY(capturing()) && capture_boxed(op, stack)) return;  // CUDA graph capture (graph.cpp)
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const size_t n = args.size();
  const size_t base = stack->size() - n;

  Scan scan;
  for (size_t i = 0; i < n; ++i) {
    const c10::IValue& v = (*stack)[base + i];
    if (v.isTensor()) {
      scan.see(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) scan.see(t);
    } else if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList()) {
        const std::optional<at::Tensor> o = t;
        if (o.has_value()) scan.see(*o);
      }
    }
  }
  if (scan.device < 0) scan.device = current_device();
  TORCH_CHECK(!scan.host_tensor || mixes_devices(schema.operator_name()),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              c10::Device(kType, scan.device), " and cpu! (when checking arguments for ", schema.name(), ")");
  if (schema.name() == "aten::nonzero" || schema.name() == "aten::masked_select") synchronizing(schema.name().c_str());

  c10::SmallVector<Viewed, 8> viewed;
  for (size_t i = 0; i < n; ++i) {
    c10::IValue& v = (*stack)[base + i];
    if (v.isTensor()) {
      v = to_cpu(v.toTensor(), viewed);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorList()) list.push_back(to_cpu(t, viewed));
      v = std::move(list);
    } else if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const auto& t : v.toOptionalTensorList()) {
        const std::optional<at::Tensor> o = t;
        list.push_back(o.has_value() ? std::optional<at::Tensor>(to_cpu(*o, viewed)) : std::nullopt);
      }
      v = std::move(list);
    } else if (v.isNone() && is_generator_slot(args[i])) {
      v = default_generator(scan.device);
    }
  }

  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);

  // an out= argument the CPU kernel resized now lives in new memory: move it onto the device
  for (const auto& v : viewed) {
    const at::Tensor& view = v.view;
    if (view.storage().data() != v.original.storage().data() || view.sizes() != v.original.sizes()) {
      at::Tensor original = v.original;
      original.resize_(view.sizes());
      if (view.strides() != original.strides()) original.as_strided_(view.sizes(), view.strides());
      cpu_view(original, false).copy_(view);
    }
  }

  const size_t m = schema.returns().size();
  for (size_t i = stack->size() - m; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = back(v.toTensor(), scan.device, viewed);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorList()) list.push_back(back(t, scan.device, viewed));
      v = std::move(list);
    }
  }
}

// operators that change a tensor's metadata in place: the CPU kernel would change the view's only
bool metadata_in_place(const std::string& name) {
  return name == "aten::as_strided_" || name == "aten::resize_" || name == "aten::resize_as_" || name == "aten::set_" ||
         name == "aten::squeeze_" || name == "aten::unsqueeze_" || name == "aten::transpose_" || name == "aten::t_" ||
         name == "aten::swapdims_" || name == "aten::swapaxes_" || name == "aten::detach_";
}

}  // namespace

TORCH_LIBRARY_IMPL(_, CUDASHIM_KEY, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

void register_structured_direct() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0 || metadata_in_place(name.name)) continue;
    auto h = dispatcher.findOp(name);
    if (!h || !h->hasSchema() || h->hasKernelForDispatchKey(kKey) || !h->hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
        !h->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) ||
        h->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
      continue;
    }
    bool view = false;  // a view must alias the device tensor's own storage: never through CPU views
    for (const auto& r : h->schema().returns()) view = view || (r.alias_info() != nullptr && !r.alias_info()->isWrite());
    if (view) continue;
    const std::string op = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib->impl(op.c_str(), torch::CppFunction::makeFromBoxedFunction<&fallback>());
  }
}

}  // namespace cudashim
