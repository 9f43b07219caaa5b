// The backend hooks PyTorch asks about an accelerator: is there one, how many devices, pinned
// memory, generators. at::getAccelerator() (autograd's stream handling, torch.accelerator, pinned
// memory) asks them, so without them backward() on a device tensor fails.
//
// CUDA's hooks are created once, from a registry, while torch._C initialises: before this library
// can load (it loads after `import torch`). A CPU build creates the interface's own stub, an object
// with no state but its vtable pointer; a CUDA build creates torch's CUDA hooks (no state of their own
// either), which would ask a driver the emulated device does not have. register_hooks() constructs our
// hooks in that object's place (same type hierarchy, the interface's size, checked below; the object
// there was made at least that large), so every later getCUDAHooks() call, cached reference or not,
// reaches them. It runs only where the emulated device serves CUDA, which the platform chooses where
// no GPU is found: the nvidia platform never loads this library.
#include "shim.h"

#include <new>
#include <typeinfo>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>

namespace cudashim {
namespace {

// what both devices answer, over CUDA's hooks interface or PrivateUse1's
template <class Base>
struct Hooks : Base {
  void init() const override {}
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return cudashim::current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    const auto old = cudashim::current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  c10::Device getDeviceFromPtr(void*) const override { return c10::Device(kType, cudashim::current_device()); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override { return default_generator(index); }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override { return new_generator(index); }
};

struct CudaHooks final : Hooks<at::CUDAHooksInterface> {
  explicit CudaHooks(at::CUDAHooksArgs) {}
  bool hasCUDA() const override { return device_count() > 0; }
  c10::DeviceIndex current_device() const override { return cudashim::current_device(); }
  int getNumGPUs() const override { return device_count(); }
  void deviceSynchronize(c10::DeviceIndex) const override {}
};

struct NpuHooks final : Hooks<at::PrivateUse1HooksInterface> {
  // Storage.resize_ of a device storage, as torch_npu's storage_resize_npu does it: new memory from the
  // storage's allocator (the device's), the old bytes copied in up to the smaller size, the old memory freed
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), newsize);
  }
};

}  // namespace

void register_hooks() {
  if (is_cuda()) {
    static_assert(sizeof(CudaHooks) == sizeof(at::CUDAHooksInterface), "the hooks must fit the stub they replace");
    auto& current = const_cast<at::CUDAHooksInterface&>(at::detail::getCUDAHooks());
    if (typeid(current) != typeid(CudaHooks)) {
      current.~CUDAHooksInterface();
      new (&current) CudaHooks(at::CUDAHooksArgs{});
    }
  } else {
    static NpuHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  }
}

}  // namespace cudashim
