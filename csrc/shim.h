// The emulated device's shared declarations: one host-memory device type, chosen at build time.
//
// CUDASHIM_KEY names the dispatch key and device type (CUDA for the cpu platform; PrivateUse1 for
// the simulated Ascend device). Everything else in csrc/ is written against kKey / kType only.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceType.h>
#include <c10/core/DispatchKey.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <unordered_map>
#include <vector>

#ifndef CUDASHIM_KEY
#define CUDASHIM_KEY CUDA
#define CUDASHIM_KEY_IS_CUDA 1
#endif

namespace cudashim {

constexpr c10::DeviceType kType = c10::DeviceType::CUDASHIM_KEY;
constexpr c10::DispatchKey kKey = c10::DispatchKey::CUDASHIM_KEY;

// devices.cpp: how many devices, which one this thread uses, CUDA's range error
c10::DeviceIndex device_count();
void set_device_count(c10::DeviceIndex n);
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
c10::DeviceIndex check_index(c10::DeviceIndex index);  // -1 -> current; raises out of range
int sync_debug_mode();
void set_sync_debug_mode(int mode);
void synchronizing(const char* what);  // warns or raises per sync_debug_mode, as CUDA does

// allocator.cpp: host memory with per-device statistics
c10::Allocator* device_allocator(c10::DeviceIndex index);
c10::Allocator* pinned_allocator();
bool is_pinned_ptr(const void* ptr);
struct DeviceStats {
  int64_t allocated = 0, allocated_peak = 0, allocations = 0, allocations_peak = 0;
  int64_t allocated_total = 0, freed_total = 0, num_alloc = 0, num_free = 0;
  int64_t reserved = 0, reserved_peak = 0, segments = 0, segments_peak = 0;  // blocks held from the host
  int64_t reserved_total = 0, released_total = 0, num_segment_alloc = 0, num_segment_free = 0;
};
DeviceStats device_stats(c10::DeviceIndex index);
void reset_peak(c10::DeviceIndex index);
void empty_cache();  // the cached blocks of every device go back to the host
int64_t pinned_bytes();
// A CPU kernel's output memory (from the CPU allocator) becomes device memory of `index` without a
// copy: dp is re-owned (counted in the device's statistics, freed by the CPU allocator's deleter).
// False when dp is not plain CPU-allocator memory (then the caller keeps its owner alive instead).
bool adopt(c10::DataPtr& dp, size_t nbytes, c10::DeviceIndex index);
void install_allocators();

// views.cpp: the same memory seen from the other side
at::Tensor cpu_view(const at::Tensor& t, bool keep_alive = true);
// A CPU kernel's output as a device tensor of `index`: its memory adopted where nothing else holds it,
// its own TensorImpl turned into the device tensor where nothing else holds that (pass it moved);
// `base`: the device storage of the argument the output is a view of.
at::Tensor as_device(at::Tensor cpu, c10::DeviceIndex index, const c10::Storage* base = nullptr);
// A CPU kernel's argument: a device tensor as a CPU view of its memory (not kept alive: the caller
// holds the tensor for the call); any other tensor, or an undefined one, as it is.
inline at::Tensor host(const at::Tensor& t) {
  return t.defined() && t.device().type() == kType ? cpu_view(t, false) : t;
}

// kernels.cpp: a strided buffer of device `index` (empty_strided's kernel; Inductor's wrapper allocations,
// which skip the dispatcher)
at::Tensor empty_on(c10::DeviceIndex index, c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype);

// hooks.cpp, sdpa.cpp
void register_hooks();
void register_sdpa_choice();
void register_cpu_kernels_direct();  // fallback.cpp: operators with a CPU kernel take it, not their composite
void register_host_composites();     // fallback.cpp: a few hot composite operators run whole on the CPU
void register_collectives();  // collectives.cpp: once torch.distributed is loaded

// npu_coverage.cpp: torch_npu's operator table on the simulated NPU (inactive until set_npu_native)
bool npu_coverage_active();
void npu_cpu_fallback_check(const c10::OperatorHandle& op);  // warns, counts or refuses as npu_cpu_fallback
void set_npu_native(const std::vector<std::string>& names, const std::vector<std::string>& sparse);
bool npu_native(const std::string& name);  // "name.overload" (no aten::) has an NPU kernel in the table
std::unordered_map<std::string, int64_t> npu_fallback_counts();

// exit.cpp: at interpreter exit (atexit), the autograd device threads have let go of every backward
void quiesce_autograd();

// generator.cpp
const at::Generator& default_generator(c10::DeviceIndex index);

// graph.cpp: CUDA graph capture (issue 18)
bool capturing();         // calls reaching the device key are recorded (not while a recorded call runs)
bool capture_underway();  // a capture is open on this thread (also while a recorded call runs)
void capture_refuse(const char* what);  // CUDA's capture error when a capture is open, else nothing
// record the call on the stack (run it when CUDA would have to); true: the stack holds its returns
bool capture_boxed(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack);
// a device kernel of its own (not the fallback) under capture: record the call by name, return its result
at::Tensor capture_call(const char* name, std::vector<c10::IValue> args);
bool capture_copy(const at::Tensor& self, const at::Tensor& src, bool non_blocking);  // true: run it now too
at::Tensor capture_note(at::Tensor t);  // memory allocated while a capture is open is the graph's
void register_generator(const at::Generator& g);

}  // namespace cudashim
