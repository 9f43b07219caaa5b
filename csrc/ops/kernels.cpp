// The kernels the device registers itself: allocation, copies, resizing and the view operators.
// View operators must alias the device tensor's own storage, so they cannot go through the CPU
// fallback; PyTorch's own implementations of them are device-agnostic and are registered as is.
#include "call.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

namespace cudashim {
namespace {

c10::DeviceIndex index_of(std::optional<c10::Device> device) {
  return check_index(device.has_value() ? device->index() : -1);
}

// torch.use_deterministic_algorithms(True) with torch.utils.deterministic.fill_uninitialized_memory:
// a new tensor's memory is filled (NaN, or the integer type's largest value), as CUDA's empty and
// torch_npu's (should_fill_empty_deterministic, TensorFactories.cpp) fill it; torch_npu asks its own
// switch as well, which the setter of fill_uninitialized_memory turns with torch's
// (_npu_set_fill_uninitialized_memory)
bool g_npu_fill_uninitialized = false;

at::Tensor filled_if_deterministic(at::Tensor t) {
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                   at::globalContext().deterministicFillUninitializedMemory() && (is_cuda() || g_npu_fill_uninitialized))) {
    at::native::fill_empty_deterministic_(t);
  }
  return t;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  const auto i = index_of(device);
  return filled_if_deterministic(capture_note(at::detail::empty_generic(size, device_allocator(i), c10::DispatchKeySet(kKey),
                                                                         c10::dtype_or_default(dtype), memory_format)));
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  return filled_if_deterministic(empty_on(index_of(device), size, stride, c10::dtype_or_default(dtype)));
}

bool on_device(const at::Tensor& t) { return t.device().type() == kType; }

}  // namespace

void set_npu_fill_uninitialized_memory(bool on) { g_npu_fill_uninitialized = on; }
bool npu_fill_uninitialized_memory() { return g_npu_fill_uninitialized; }

at::Tensor empty_on(c10::DeviceIndex index, c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype) {
  return capture_note(at::detail::empty_strided_generic(size, stride, device_allocator(index),
                                                        c10::DispatchKeySet(kKey), dtype));
}

namespace {

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  // CUDA graph capture (graph.cpp): recorded; run now only into the capture's own memory
  if (C10_UNLIKELY(capturing()) && !capture_copy(self, src, non_blocking)) return self;
  const bool d2h = !on_device(self) && on_device(src);
  const bool h2d = on_device(self) && !on_device(src);
  // what CUDA synchronizes on: every device->host copy into pageable memory, and blocking copies
  if ((d2h && !(non_blocking && is_pinned_ptr(self.storage().data()))) || ((d2h || h2d) && !non_blocking)) {
    synchronizing("copy");
  }
  at::Tensor dst = on_device(self) ? cpu_view(self, false) : self;
  at::Tensor from = on_device(src) ? cpu_view(src, false) : src;
  dst.copy_(from, false);
  return self;
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> format) {
  // the CPU implementation grows storage through the storage's own allocator: ours
  return at::native::resize_(self, size, format);
}

at::Tensor& set_empty_(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, device_allocator(self.device().index()), true);
  return at::native::set_storage_cpu_(self, storage, 0, {0}, {});
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  synchronizing("item");
  return at::_local_scalar_dense(cpu_view(self, false));
}

void record_stream(at::Tensor& /*self*/, c10::Stream /*stream*/) {}  // nothing is freed early

// Tensor.to / .cpu() / .float() of a device tensor: the CPU's _to_copy on a view of its memory, its
// result the host tensor asked for, or adopted as the device's when it stays on the device (one
// call instead of PyTorch's composite: an empty tensor and a copy_ through the dispatcher each).
// Pinned targets, other devices and layouts, and anything under capture take the composite.
at::Tensor to_copy(const at::Tensor& self, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                   std::optional<c10::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<c10::MemoryFormat> memory_format) {
  const c10::Device to = device.value_or(self.device());
  const bool plain = self.layout() == c10::kStrided && layout.value_or(c10::kStrided) == c10::kStrided &&
                     !pin_memory.value_or(false) && !capture_underway();
  if (plain && to.is_cpu()) {
    // a non-blocking copy to the host lands in pinned memory and does not synchronize, as CUDA's and
    // torch_npu's _to_copy make it (pin_out); a blocking one goes to pageable memory
    const at::Tensor from = cpu_view(self, false);
    if (non_blocking) {
      at::Tensor out = at::empty_like(from, from.options().dtype(dtype.value_or(self.scalar_type())).pinned_memory(true),
                                      memory_format.value_or(c10::MemoryFormat::Preserve));
      return out.copy_(from);
    }
    synchronizing("copy");  // a device->host copy into pageable memory
    return at::_to_copy(from, dtype, layout, to, pin_memory, false, memory_format);
  }
  if (plain && to.type() == kType && (!to.has_index() || to.index() == self.device().index())) {
    const auto index = self.device().index();
    return as_device(at::_to_copy(cpu_view(self, false), dtype, layout, c10::Device(c10::kCPU), std::nullopt, false,
                                  memory_format),
                     index);
  }
  return at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
}

// A 0-dim tensor holding a value (SDPA's masks make one per call): written on the host and adopted,
// instead of an empty tensor and a fill_ through the dispatcher. Under capture: the graph's memory.
at::Tensor scalar_tensor(const at::Scalar& s, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  const auto i = index_of(device);
  if (C10_UNLIKELY(capture_underway())) {
    return at::empty({}, at::TensorOptions().dtype(dtype).device(kType, i)).fill_(s);
  }
  return as_device(at::detail::scalar_tensor_static(s, c10::dtype_or_default(dtype), c10::Device(c10::kCPU)), i);
}

// Dropout's fused kernel (F.dropout reaches it for any GPU tensor): the CPU's has no generator
// argument and draws from the CPU's generator. The same steps as the CPU's (native_dropout_cpu), as
// device operators, so the mask comes from the device's generator (and a CUDA graph records them).
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) return std::make_tuple(input, at::empty_like(input, input.options()));
  const auto as_bool = input.options().dtype(at::kBool);
  if (train.has_value() && !*train) return std::make_tuple(input.clone(), at::ones_like(input, as_bool));
  const double p1m = 1. - p;
  const double scale = p1m == 0 ? 0. : 1. / p1m;  // no division by zero, no NaN
  at::Tensor mask = at::empty_like(input, as_bool);
  mask.bernoulli_(p1m);
  return std::make_tuple(input.mul(mask).mul_(scale), mask);
}

}  // namespace

void register_kernels() {
  static torch::Library m(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  kernel<&native_dropout, Capture::Itself>(m, "native_dropout");
  kernel<&empty_memory_format, Capture::Itself>(m, "empty.memory_format");
  kernel<&empty_strided, Capture::Itself>(m, "empty_strided");
  kernel<&copy_, Capture::Itself>(m, "copy_");
  kernel<&resize_, Capture::Itself>(m, "resize_");
  kernel<&set_empty_, Capture::Itself>(m, "set_");
  kernel<&at::native::set_, Capture::Itself>(m, "set_.source_Storage");
  kernel<&at::native::set_storage_cpu_, Capture::Itself>(m, "set_.source_Storage_storage_offset");
  kernel<&at::native::set_tensor_, Capture::Itself>(m, "set_.source_Tensor");
  kernel<&local_scalar_dense, Capture::Itself>(m, "_local_scalar_dense");
  kernel<&record_stream, Capture::Itself>(m, "record_stream");
  kernel<&scalar_tensor, Capture::Itself>(m, "scalar_tensor");
  kernel<&to_copy, Capture::Itself>(m, "_to_copy");
  kernel<&at::native::as_strided_tensorimpl, Capture::Itself>(m, "as_strided");
  kernel<&at::native::view, Capture::Itself>(m, "view");
  kernel<&at::native::_reshape_alias, Capture::Itself>(m, "_reshape_alias");
  kernel<&at::native::unfold, Capture::Itself>(m, "unfold");
  kernel<&at::native::view_as_real, Capture::Itself>(m, "view_as_real");
  kernel<&at::native::view_as_complex, Capture::Itself>(m, "view_as_complex");
}

}  // namespace cudashim
