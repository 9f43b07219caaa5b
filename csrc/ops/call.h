// One call of a CPU kernel on device tensors: their devices checked as a GPU checks them, each seen
// by the kernel as a CPU view of its memory, the kernel's outputs handed back as device tensors.
// Shared by the boxed fallback (fallback.cpp) and the unboxed one of the hottest operators (direct.cpp).
#pragma once

#include "shim.h"

#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/boxing/impl/boxing.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <string>

namespace cudashim {

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);  // fallback.cpp
// fallback.cpp: a call the core's own kernel does not take on the simulated NPU (NpuKernel::Composite or
// Fallback): the operator's composite, else the fallback (which decides as torch_npu's does)
void core_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// A typed kernel of the core's own for kKey, registered with kernel<&fn>(m, "name.overload"). It stands
// for CUDA's kernel, or for torch_npu's: on the simulated NPU, an operator torch_npu has no kernel for
// takes torch_npu's way instead (its composite, or the CPU fallback with its warning, count and
// refusal), and one it has a kernel for passes torch_npu's dtype checks first. Decided once per
// operator (the table is set before any operator runs); the cuda device pays one flag test per call.
//
// Under CUDA graph capture a kernel that computes is recorded like the fallback's calls (graph.cpp's
// capture_boxed), so a replay runs it again on what its inputs hold then: a kernel of the core's own
// is past the fallback, where capture records, and one that ran only at capture would hand every
// replay the capture's answer. Capture::Itself marks the kernels that handle capture themselves or
// compute nothing a replay could change (allocation, views, metadata, copies).
enum class Capture { Record, Itself };

template <auto Fn, Capture C>
struct Gated;
template <class R, class... A, R (*Fn)(A...), Capture C>
struct Gated<Fn, C> {
  static_assert(c10::impl::can_box_all<A...>::value, "a gated kernel's arguments must box");
  static inline std::string name, overload;

  static const c10::OperatorHandle& handle() {
    static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
    return op;
  }

  // the recorded call: capture_boxed runs it once through this kernel again (no longer "capturing")
  static void recorded(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    if (!capture_boxed(op, stack)) op.redispatchBoxed(c10::DispatchKeySet(kKey), stack);
  }

  static R call(A... args) {
    if constexpr (C == Capture::Record) {
      if (C10_UNLIKELY(capturing())) {
        return c10::impl::BoxedKernelWrapper<R(A...)>::call(c10::BoxedKernel::makeFromFunction<&recorded>(), handle(),
                                                            c10::DispatchKeySet(kKey), std::forward<A>(args)...);
      }
    }
    if (C10_LIKELY(!npu_coverage_active())) return Fn(std::forward<A>(args)...);
    static const NpuKernel kind = npu_core_kernel(handle());
    if (C10_LIKELY(kind == NpuKernel::Plain)) return Fn(std::forward<A>(args)...);
    if (kind == NpuKernel::Checked) {
      npu_kernel_check(handle(), c10::impl::boxArgs<A...>(args...));
      return Fn(std::forward<A>(args)...);
    }
    return c10::impl::BoxedKernelWrapper<R(A...)>::call(c10::BoxedKernel::makeFromFunction<&core_boxed>(), handle(),
                                                        c10::DispatchKeySet(kKey), std::forward<A>(args)...);
  }
};

template <auto Fn, Capture C = Capture::Record>
void kernel(torch::Library& m, const char* op) {
  const std::string full(op);
  const auto dot = full.find('.');
  using G = Gated<Fn, C>;
  TORCH_CHECK(G::name.empty(), "cudashim: one kernel registered for two operators (", G::name, ", ", op, ")");
  G::name = "aten::" + full.substr(0, dot);
  G::overload = dot == std::string::npos ? "" : full.substr(dot + 1);
  m.impl(op, TORCH_FN(G::call));
}
struct Call;
// sparse.cpp: a sparse (COO or compressed) device tensor as a CPU sparse tensor over CPU views of its
// components; a CPU kernel's sparse output as a device sparse tensor over device components; a sparse
// device argument the CPU kernel wrote, made what its CPU twin became
at::Tensor sparse_host(Call& call, const at::Tensor& t);
at::Tensor sparse_back(const Call& call, const at::Tensor& t);
void sparse_written(const Call& call, const at::Tensor& device, const at::Tensor& host);

struct Viewed {
  at::Tensor view;  // held until the outputs are sorted out
  at::Tensor original;
  bool written;  // an in-place or out= argument (the kernel may have resized it)
};

struct Call {
  c10::DeviceIndex device = -1;
  bool host_tensor = false;  // a CPU tensor with dimensions among the arguments
  c10::DispatchKeySet sparse;  // SparseCPU / SparseCsrCPU when a sparse device tensor is among them
  c10::SmallVector<Viewed, 8> viewed;

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

  // every argument seen: the device is known (the current one for none), CPU tensors refused
  void settle(bool host_allowed, const char* op) {
    if (device < 0) device = current_device();
    TORCH_CHECK(!host_tensor || host_allowed, "Expected all tensors to be on the same device, but found at least two devices, ",
                c10::Device(kType, device), " and cpu! (when checking arguments for ", op, ")");
  }

  // The CPU kernel's argument: a device tensor as a CPU view of its memory (one view per tensor, the
  // argument holding the memory), anything else as it is. Tensors over one device storage are viewed
  // over one CPU storage, so the CPU kernel sees that they overlap as it would see it for CPU tensors
  // (an out= argument that is a view of an input). Copy the result before the next view().
  const at::Tensor& view(const at::Tensor& t, bool written = false) {
    if (!t.defined() || t.device().type() != kType) return t;
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    const c10::StorageImpl* memory = impl->has_storage() ? impl->unsafe_storage().unsafeGetStorageImpl() : nullptr;
    const Viewed* same_memory = nullptr;
    for (auto& v : viewed) {
      if (v.original.unsafeGetTensorImpl() == impl) {  // the same argument twice
        v.written = v.written || written;
        return v.view;
      }
      if (memory != nullptr && same_memory == nullptr && v.original.unsafeGetTensorImpl()->has_storage() &&
          v.original.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl() == memory) {
        same_memory = &v;
      }
    }
    if (C10_UNLIKELY(memory == nullptr && t.layout() != c10::kStrided)) {
      at::Tensor twin = sparse_host(*this, t);
      sparse = sparse | c10::DispatchKeySet(t.layout() == c10::kSparse ? c10::DispatchKey::SparseCPU
                                                                       : c10::DispatchKey::SparseCsrCPU);
      viewed.push_back({std::move(twin), t, written});
      return viewed.back().view;
    }
    at::Tensor v = same_memory != nullptr ? cpu_view_over(t, same_memory->view.storage()) : cpu_view(t, false);
    viewed.push_back({std::move(v), t, written});
    return viewed.back().view;
  }

  // Sparse kernels read whether their arguments require grad (sparse.mm's amax/amin reduction keeps
  // the argmax for its backward only then, and its backward reads it unchecked): a CPU view says what
  // its device tensor says. Only for calls with a sparse argument: autograd metadata is an allocation.
  void mark_requires_grad() {
    for (auto& v : viewed) {
      if (v.original.requires_grad() && !v.view.requires_grad()) v.view.set_requires_grad(true);
    }
  }

  // A CPU kernel's output as a device tensor: an argument it returned is that argument; a view of an
  // argument's memory lives in that argument's storage; fresh memory becomes the device's.
  at::Tensor back(at::Tensor t) const {
    if (!t.defined() || t.device().type() == kType) return t;
    const c10::Storage* base = nullptr;
    const c10::StorageImpl* s = t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
    for (const auto& v : viewed) {
      if (v.view.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return v.original;
      if (s != nullptr && v.view.has_storage() && v.view.storage().unsafeGetStorageImpl() == s) base = &v.original.storage();
    }
    if (C10_UNLIKELY(s == nullptr && t.layout() != c10::kStrided)) return sparse_back(*this, t);
    return as_device(std::move(t), device, base);
  }
};

}  // namespace cudashim
