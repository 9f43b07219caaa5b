// Pinned host memory: Tensor.pin_memory() / is_pinned() on CPU tensors. With no accelerator known
// to PyTorch's hooks these would refuse, so the device registers their CPU kernels: pinned memory
// is host memory from pinned_allocator(), which remembers its blocks.
#include "shim.h"

#include <ATen/EmptyTensor.h>
#include <torch/library.h>

namespace cudashim {
namespace {

bool is_pinned(const at::Tensor& self, std::optional<c10::Device> device) {
  if (device.has_value() && device->type() != kType) return false;
  return is_pinned_ptr(self.storage().data());
}

at::Tensor pin_memory(const at::Tensor& self, std::optional<c10::Device> device) {
  TORCH_CHECK(!device.has_value() || device->type() == kType, "pin_memory: pinned memory is for ",
              c10::Device(kType), ", not ", *device);
  at::Tensor out = at::detail::empty_strided_generic(self.sizes(), self.strides(), pinned_allocator(),
                                               c10::DispatchKeySet(c10::DispatchKey::CPU), self.scalar_type());
  out.copy_(self);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, CPU, m) {
  m.impl("is_pinned", is_pinned);
  m.impl("_pin_memory", pin_memory);
}

}  // namespace cudashim
