// The backend hooks PyTorch asks about an accelerator: is there one, how many devices, pinned
// memory, generators. at::getAccelerator() (autograd's stream handling, torch.accelerator, pinned
// memory) asks them, so without them backward() on a device tensor fails.
//
// CUDA's hooks are created once, from a registry, while torch._C initialises: before this library
// can load (it loads after `import torch`). A CPU build creates the interface's own stub, an object
// with no state but its vtable pointer. register_hooks() constructs our hooks in that object's
// place (same type hierarchy, same size, checked below), so every later getCUDAHooks() call, cached
// reference or not, reaches them. It only ever replaces that exact stub type, never real hooks.
#include "shim.h"

#include <new>
#include <typeinfo>

#include <ATen/CPUGeneratorImpl.h>

#if defined(CUDASHIM_KEY_IS_CUDA)
#include <ATen/detail/CUDAHooksInterface.h>
#else
#include <ATen/detail/PrivateUse1HooksInterface.h>
#endif

namespace cudashim {
namespace {

#if defined(CUDASHIM_KEY_IS_CUDA)
using Base = at::CUDAHooksInterface;
#else
using Base = at::PrivateUse1HooksInterface;
#endif

struct Hooks final : Base {
#if defined(CUDASHIM_KEY_IS_CUDA)
  explicit Hooks(at::CUDAHooksArgs) {}
  bool hasCUDA() const override { return device_count() > 0; }
  c10::DeviceIndex current_device() const override { return cudashim::current_device(); }
  int getNumGPUs() const override { return device_count(); }
  void deviceSynchronize(c10::DeviceIndex) const override {}
#endif
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

}  // namespace

void register_hooks() {
#if defined(CUDASHIM_KEY_IS_CUDA)
  static_assert(sizeof(Hooks) == sizeof(at::CUDAHooksInterface), "the hooks must fit the stub they replace");
  auto& current = const_cast<at::CUDAHooksInterface&>(at::detail::getCUDAHooks());
  if (typeid(current) == typeid(at::CUDAHooksInterface)) {
    current.~CUDAHooksInterface();
    new (&current) Hooks(at::CUDAHooksArgs{});
  }
#else
  static Hooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
#endif
}

}  // namespace cudashim

