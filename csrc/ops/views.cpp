// One block of host memory, seen as a CPU tensor or as a device tensor: no copy either way.
#include "shim.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>

#include <cstring>
#include <typeinfo>

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

// A CPU tensor with a device tensor's metadata copied as it is (sizes, strides, offset and the
// contiguity flags already computed), over another storage: what one fallback call costs per argument.
// Like the device tensor it is an inference tensor or not; if not, it shares its version counter
// (the same memory: an in-place write through the view, Gloo's for instance, is a write to it).
struct CpuView final : c10::TensorImpl {
  CpuView(const c10::TensorImpl* from, c10::Storage storage)
      : c10::TensorImpl(c10::DispatchKeySet(c10::DispatchKey::CPU), from->dtype(), c10::Device(c10::kCPU)) {
    const bool tracked = from->key_set().has_any(c10::inplace_or_view_ks);
    copy_tensor_metadata(from, this, tracked ? from->version_counter() : c10::VariableVersion(c10::VariableVersion::DISABLED),
                         true);
    constexpr auto cpu = c10::BackendComponent::CPUBit;
    constexpr auto bits = c10::DispatchKeySet({c10::DispatchKey::Conjugate, c10::DispatchKey::Negative});
    auto keys = c10::DispatchKeySet(c10::DispatchKey::CPU) | c10::getAutocastRelatedKeySetFromBackend(cpu) |
                (from->key_set() & bits);
    key_set_ = tracked ? keys | c10::getAutogradRelatedKeySetFromBackend(cpu) : keys;
    storage_ = std::move(storage);
    device_opt_ = c10::Device(c10::kCPU);
  }
};
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
  return at::Tensor(c10::make_intrusive<CpuView>(t.unsafeGetTensorImpl(), std::move(s)));
}

at::Tensor cpu_view_over(const at::Tensor& t, const c10::Storage& storage) {
  return at::Tensor(c10::make_intrusive<CpuView>(t.unsafeGetTensorImpl(), storage));
}

at::Tensor as_device(at::Tensor cpu, c10::DeviceIndex index, const c10::Storage* base) {
  c10::TensorImpl* t = cpu.unsafeGetTensorImpl();
  // held by nothing else (a CPU kernel's fresh output, moved here): this TensorImpl becomes the device
  // tensor itself, sizes, strides and flags as they are, instead of a new one built beside it
  const bool own = cpu.use_count() == 1 && cpu.weak_use_count() == 1 && typeid(*t) == typeid(c10::TensorImpl) &&
                   t->allow_tensor_metadata_change();
  c10::Storage storage;
  if (base != nullptr) {
    storage = *base;  // a view of an argument: the argument's own device storage
  } else {
    const c10::Storage& st = cpu.storage();
    auto* impl = st.unsafeGetStorageImpl();
    const size_t nbytes = st.nbytes();
    bool adopted = false;
    if (st.use_count() == 1) {
      // memory a CPU kernel allocated for its output, held by nothing else: it becomes device memory
      c10::DataPtr dp = impl->set_data_ptr(c10::DataPtr());
      adopted = adopt(dp, nbytes, index);
      if (adopted && own) {  // the same StorageImpl, now the device's
        impl->set_data_ptr_noswap(std::move(dp));
        impl->set_allocator(device_allocator(index));
        storage = st;
      } else if (adopted) {
        storage = c10::Storage(c10::Storage::use_byte_size_t(), nbytes, std::move(dp), device_allocator(index), true);
      } else {
        impl->set_data_ptr_noswap(std::move(dp));
      }
    }
    if (!adopted) {
      storage = c10::Storage(c10::Storage::use_byte_size_t(), nbytes,
                             keeping(impl->mutable_data(), impl, c10::Device(kType, index)), device_allocator(index), true);
    }
  }
  if (own) {
    t->set_storage_keep_dtype(std::move(storage));  // the device now comes from the storage
    t->_change_backend_component_keys(c10::Device(kType, index));
    return cpu;
  }
  return wrap(std::move(storage), cpu, c10::DispatchKeySet(kKey));
}

// Tensors across processes (cudashim/emulated/ipc.py): a device storage's memory moves into `host`, a
// CPU storage at least as large (in shared memory): its bytes are copied there and the storage points
// at them from now on, holding `host`; every tensor over it, and every process that maps `host`, sees
// the same memory.
void rehome(const at::Tensor& device_tensor, const at::Tensor& host) {
  c10::StorageImpl* s = device_tensor.storage().unsafeGetStorageImpl();
  c10::StorageImpl* h = host.storage().unsafeGetStorageImpl();
  TORCH_CHECK(device_tensor.device().type() == kType && host.device().is_cpu(),
              "rehome: expected a device tensor and a CPU tensor, got ", device_tensor.device(), " and ", host.device());
  TORCH_CHECK(h->nbytes() >= s->nbytes(), "rehome: the host storage (", h->nbytes(), " bytes) is smaller than the device's (",
              s->nbytes(), " bytes)");
  if (s->nbytes() > 0) std::memcpy(h->mutable_data(), s->data(), s->nbytes());
  s->set_data_ptr_noswap(keeping(h->mutable_data(), h, s->data_ptr().device()));
}

// The CPU storage that holds a device storage's memory (rehome(), or device_over()), as a CPU byte
// tensor over it; undefined when the device storage holds its own memory.
at::Tensor host_owner(const at::Tensor& device_tensor) {
  const c10::DataPtr& dp = device_tensor.storage().data_ptr();
  if (dp.get_deleter() != &keep_release) return at::Tensor();
  auto* h = static_cast<c10::StorageImpl*>(dp.get_context());
  c10::Storage st(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(h));
  return at::empty({0}, at::TensorOptions().dtype(at::kByte)).set_(st);
}

// A byte tensor of device `index` over the memory of a CPU storage (another process's shared memory),
// holding that storage.
at::Tensor device_over(const at::Tensor& host, c10::DeviceIndex index) {
  c10::StorageImpl* h = host.storage().unsafeGetStorageImpl();
  c10::Storage storage(c10::Storage::use_byte_size_t(), h->nbytes(),
                       keeping(h->mutable_data(), h, c10::Device(kType, check_index(index))), nullptr, false);
  auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(kKey),
                                                      caffe2::TypeMeta::Make<uint8_t>());
  out.unsafeGetTensorImpl()->set_sizes_contiguous({static_cast<int64_t>(h->nbytes())});
  return out;
}

}  // namespace cudashim
