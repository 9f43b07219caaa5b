// Sparse tensors on the device: COO (SparseCUDA) and compressed (SparseCsrCUDA: CSR, CSC, BSR, BSC).
//
// A sparse device tensor is PyTorch's own sparse tensor whose components (indices and values; compressed
// and plain indices and values) are dense device tensors. A CPU build registers no kernel for the
// sparse CUDA keys, so every operator on them takes the device's fallback (fallback.cpp), which sees a
// sparse argument as its CPU twin: a CPU sparse tensor over CPU views of the same components. The
// SparseCPU (SparseCsrCPU) kernel runs on the twins; a sparse result comes back as a device sparse
// tensor over its components handed back as any result is (a component the kernel returned as it was
// is the device's own; fresh memory becomes the device's), and a sparse argument the kernel wrote (in
// place, out=) takes its twin's new components. The creation of a COO tensor from device components
// is PyTorch's own, device-agnostic kernel, as CUDA registers it.
#include "call.h"

#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <memory>
#include <string>

namespace cudashim {
namespace {
at::SparseTensorImpl* coo(const at::Tensor& t) { return static_cast<at::SparseTensorImpl*>(t.unsafeGetTensorImpl()); }
}  // namespace

at::Tensor sparse_host(Call& call, const at::Tensor& t) {
  const auto cpu = t.options().device(c10::kCPU);
  if (t.layout() == c10::kSparse) {
    const auto* impl = coo(t);
    at::Tensor indices = call.view(impl->indices());
    at::Tensor values = call.view(impl->values());
    return at::_sparse_coo_tensor_with_dims_and_tensors(impl->sparse_dim(), impl->dense_dim(), t.sizes(), indices, values,
                                                        cpu, impl->coalesced());
  }
  const auto* impl = at::sparse_csr::get_sparse_csr_impl(t);
  at::Tensor compressed = call.view(impl->compressed_indices());
  at::Tensor plain = call.view(impl->plain_indices());
  at::Tensor values = call.view(impl->values());
  return at::_sparse_compressed_tensor_unsafe(compressed, plain, values, t.sizes(), cpu);
}

at::Tensor sparse_back(const Call& call, const at::Tensor& t) {
  const auto options = t.options().device(c10::Device(kType, call.device));
  const c10::DeviceGuard guard(options.device());  // a new sparse tensor is made on the current device
  if (t.layout() == c10::kSparse) {
    const auto* impl = coo(t);
    return at::_sparse_coo_tensor_with_dims_and_tensors(impl->sparse_dim(), impl->dense_dim(), t.sizes(),
                                                        call.back(impl->indices()), call.back(impl->values()), options,
                                                        impl->coalesced());
  }
  const auto* impl = at::sparse_csr::get_sparse_csr_impl(t);
  return at::_sparse_compressed_tensor_unsafe(call.back(impl->compressed_indices()), call.back(impl->plain_indices()),
                                              call.back(impl->values()), t.sizes(), options);
}

void sparse_written(const Call& call, const at::Tensor& device, const at::Tensor& host) {
  if (device.layout() == c10::kSparse) {
    const auto* from = coo(host);
    auto* to = coo(device);
    to->raw_resize_(from->sparse_dim(), from->dense_dim(), host.sizes());
    to->set_indices_and_values_unsafe(call.back(from->indices()), call.back(from->values()));
    to->set_coalesced(from->coalesced());
    return;
  }
  const auto* from = at::sparse_csr::get_sparse_csr_impl(host);
  at::sparse_csr::get_sparse_csr_impl(device)->set_member_tensors(
      call.back(from->compressed_indices()), call.back(from->plain_indices()), call.back(from->values()), host.sizes());
}

// Every operator with a SparseCPU (SparseCsrCPU) kernel takes it on the device's sparse tensors. The
// backend fallback below is not enough: an operator with a CompositeExplicitAutograd kernel has that in
// every backend's slot, and for sparse tensors that kernel is often a refusal (is_coalesced,
// crow_indices: "expected sparse coordinate tensor layout") that the CPU's sparse kernel overrides.
// Unlike dense ones, sparse views need no exception: the component a view returns comes back as the
// device's own component (or a view of its memory).
void register_sparse_cpu_kernels() {
  if (!is_cuda()) return;  // the simulated NPU's sparse tensors take torch_npu's fallback (npu_coverage.cpp)
  static std::unique_ptr<torch::Library> coo, compressed;
  if (coo) return;
  coo = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::SparseCUDA, __FILE__, __LINE__);
  compressed = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::SparseCsrCUDA, __FILE__,
                                                __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto h = dispatcher.findOp(name);
    if (!h || !h->hasSchema()) continue;
    const std::string op = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    const auto fn = [] { return torch::CppFunction::makeFromBoxedFunction<&fallback>(); };
    if (h->hasKernelForDispatchKey(c10::DispatchKey::SparseCPU) && !device_has_kernel(*h, c10::DispatchKey::SparseCUDA)) {
      coo->impl(op.c_str(), fn());
    }
    if (h->hasKernelForDispatchKey(c10::DispatchKey::SparseCsrCPU) &&
        !device_has_kernel(*h, c10::DispatchKey::SparseCsrCUDA)) {
      compressed->impl(op.c_str(), fn());
    }
  }
}

void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);  // fallback.cpp

// The simulated NPU's sparse COO tensors: the operators torch_npu registers for SparsePrivateUse1
// (torch's device-generic sparse kernels, RegisterSparseNPU.cpp, and op-plugin's; the list comes from
// the release's data, coverage.py) run as the cuda device's do, on the CPU twins; a COO tensor from
// npu components is torch's own device-agnostic kernel, as torch_npu registers it. Every other
// operator keeps torch_npu's refusal (npu_coverage.cpp's fallback for the key).
void register_npu_sparse_kernels(const std::vector<std::string>& ops) {
  static std::unique_ptr<torch::Library> lib;
  if (lib || is_cuda()) return;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::SparsePrivateUse1, __FILE__,
                                         __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const std::string& name : ops) {
    if (name == "_sparse_coo_tensor_with_dims_and_tensors") {
      lib->impl(name.c_str(), TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
      continue;
    }
    if (name == "_sparse_coo_tensor_with_dims") {
      lib->impl(name.c_str(), TORCH_FN(at::native::new_with_dims_sparse));
      continue;
    }
    const auto dot = name.find('.');
    auto h = dispatcher.findOp(c10::OperatorName("aten::" + name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1)));
    if (!h || !h->hasSchema() || !h->hasKernelForDispatchKey(c10::DispatchKey::SparseCPU)) continue;
    lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
  }
}

// the sparse keys' fallbacks, and a COO tensor from device components (sparse_coo_tensor, .to("cuda"),
// every sparse result above); init() calls it for the cuda device only
void register_sparse() {
  if (!is_cuda()) return;
  static torch::Library coo(torch::Library::IMPL, "_", c10::DispatchKey::SparseCUDA, __FILE__, __LINE__);
  coo.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
  static torch::Library compressed(torch::Library::IMPL, "_", c10::DispatchKey::SparseCsrCUDA, __FILE__, __LINE__);
  compressed.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
  static torch::Library m(torch::Library::IMPL, "aten", c10::DispatchKey::SparseCUDA, __FILE__, __LINE__);
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
}

}  // namespace cudashim
