// One call of a CPU kernel on device tensors: their devices checked as a GPU checks them, each seen
// by the kernel as a CPU view of its memory, the kernel's outputs handed back as device tensors.
// Shared by the boxed fallback (fallback.cpp) and the unboxed one of the hottest operators (direct.cpp).
#pragma once

#include "shim.h"

#include <c10/util/SmallVector.h>

namespace cudashim {

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);  // fallback.cpp

struct Viewed {
  at::Tensor view;  // held until the outputs are sorted out
  at::Tensor original;
  bool written;  // an in-place or out= argument (the kernel may have resized it)
};

struct Call {
  c10::DeviceIndex device = -1;
  bool host_tensor = false;  // a CPU tensor with dimensions among the arguments
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
  // argument holding the memory), anything else as it is. The reference stays valid for the call
  // while no more than 8 tensors are viewed.
  const at::Tensor& view(const at::Tensor& t, bool written = false) {
    if (!t.defined() || t.device().type() != kType) return t;
    for (auto& v : viewed) {
      if (v.original.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {  // the same argument twice
        v.written = v.written || written;
        return v.view;
      }
    }
    viewed.push_back({cpu_view(t, false), t, written});
    return viewed.back().view;
  }

  // A CPU kernel's output as a device tensor: an argument it returned is that argument; a view of an
  // argument's memory lives in that argument's storage; fresh memory becomes the device's.
  at::Tensor back(at::Tensor t) const {
    if (!t.defined() || t.device().type() == kType) return t;
    const c10::Storage* base = nullptr;
    const c10::StorageImpl* s = t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
    for (const auto& v : viewed) {
      if (v.view.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return v.original;
      if (s != nullptr && v.view.storage().unsafeGetStorageImpl() == s) base = &v.original.storage();
    }
    return as_device(std::move(t), device, base);
  }
};

}  // namespace cudashim
