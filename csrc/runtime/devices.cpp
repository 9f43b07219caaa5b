// Device count, the calling thread's current device, and sync-debug mode.
#include "shim.h"

#include <atomic>
#include <cstdlib>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

namespace cudashim {

c10::DeviceType kType = c10::DeviceType::CUDA;  // init() sets both, before anything reads them
c10::DispatchKey kKey = c10::DispatchKey::CUDA;

namespace {

// Python sets the count from the environment (cudashim/visibility.py) before any device is used; until
// then, the variable's value where it is in range, else 1
c10::DeviceIndex initial_count() {
  const char* s = std::getenv("CUDASHIM_CPU_DEVICES");
  if (s == nullptr || *s == '\0') return 1;
  const long n = std::strtol(s, nullptr, 10);
  return n >= 0 && n <= kMaxDevices ? static_cast<c10::DeviceIndex>(n) : 1;
}

std::atomic<c10::DeviceIndex> g_count{initial_count()};
std::atomic<int> g_sync_debug{0};
thread_local c10::DeviceIndex t_current = 0;  // per thread, like cudaSetDevice

}  // namespace

c10::DeviceIndex device_count() { return g_count.load(std::memory_order_relaxed); }
void set_device_count(int64_t n) {
  TORCH_CHECK(n >= 0 && n <= kMaxDevices, "cannot emulate ", n, " ", c10::DeviceTypeName(kType), " devices: 0 to ",
              kMaxDevices, " are supported");
  g_count.store(static_cast<c10::DeviceIndex>(n));
}

c10::DeviceIndex check_index(c10::DeviceIndex index) {
  const auto n = device_count();
  // the messages are CUDA's own, so code matching on them keeps working
  TORCH_CHECK(n > 0, "No ", c10::DeviceTypeName(kType), " GPUs are available");
  if (index < 0) return t_current;
  TORCH_CHECK(index < n, c10::DeviceTypeName(kType), " error: invalid device ordinal");
  return index;
}

c10::DeviceIndex current_device() { return t_current; }
void set_current_device(c10::DeviceIndex index) { t_current = check_index(index); }

int sync_debug_mode() { return g_sync_debug.load(std::memory_order_relaxed); }
void set_sync_debug_mode(int mode) { g_sync_debug.store(mode); }

void synchronizing(const char* what) {
  capture_refuse(what);  // inside a CUDA graph capture: CUDA's capture error (graph.cpp)
  const int mode = sync_debug_mode();
  if (mode == 0) return;
  if (mode == 1) {
    TORCH_WARN("called a synchronizing ", c10::DeviceTypeName(kType), " operation (", what, ")");
  } else {
    TORCH_CHECK(false, "called a synchronizing ", c10::DeviceTypeName(kType), " operation (", what, ")");
  }
}

}  // namespace cudashim
