// One block of host memory, seen as a CPU tensor or as a device tensor: no copy either way.
#include "shim.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>

namespace cudashim {
namespace {

// a DataPtr that keeps another storage alive: one reference on its StorageImpl (no wrapper allocated)
void keep_release(void* ctx) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx)); }

c10::DataPtr keeping(void* data, c10::StorageImpl* owner, c10::Device device) {
  c10::raw::intrusive_ptr::incref(owner);
  return c10::DataPtr(data, owner, &keep_release, device);
}

at::Tensor wrap(c10::Storage storage, const at::Tensor& like, c10::DispatchKeySet keys) {
  auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), keys, like.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) out._set_conj(true);
  if (like.is_neg()) out._set_neg(true);
  return out;
}

}  // namespace

at::Tensor cpu_view(const at::Tensor& t, bool keep_alive) {
  const c10::Storage& st = t.storage();
  void* data = st.unsafeGetStorageImpl()->mutable_data();
  // keep_alive: the view may outlive the call (a CPU kernel may return a view of it), so it holds
  // the device storage; a view used only inside one call holds nothing.
  c10::DataPtr dp = keep_alive ? keeping(data, st.unsafeGetStorageImpl(), c10::Device(c10::kCPU))
                               : c10::DataPtr(data, c10::Device(c10::kCPU));
  // resizable through the plain CPU allocator: an out= argument a CPU kernel resizes gets new CPU
  // memory, which the fallback then moves back onto the device
  c10::Storage s(c10::Storage::use_byte_size_t(), st.nbytes(), std::move(dp), c10::GetCPUAllocator(), true);
  return wrap(std::move(s), t, c10::DispatchKeySet(c10::DispatchKey::CPU));
}

at::Tensor as_device(const at::Tensor& cpu, c10::DeviceIndex index) {
  const c10::Storage& st = cpu.storage();
  auto* impl = st.unsafeGetStorageImpl();
  c10::DataPtr dp;
  const size_t nbytes = st.nbytes();
  bool adopted = false;
  if (st.use_count() == 1) {
    // memory a CPU kernel allocated for its output, held by nothing else: it becomes device memory
    dp = impl->set_data_ptr(c10::DataPtr());
    adopted = adopt(dp, nbytes, index);
    if (!adopted) impl->set_data_ptr_noswap(std::move(dp));
  }
  if (!adopted) {
    void* data = impl->mutable_data();
    dp = keeping(data, impl, c10::Device(kType, index));
  }
  c10::Storage s(c10::Storage::use_byte_size_t(), nbytes, std::move(dp), device_allocator(index), true);
  return wrap(std::move(s), cpu, c10::DispatchKeySet(kKey));
}

}  // namespace cudashim
