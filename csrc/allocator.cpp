// Host memory for the device, with CUDA-style statistics, and pinned host memory.
//
// Sizes are rounded up to 512 bytes as CUDA's caching allocator does, so memory_allocated() moves by
// the same amounts as on a GPU. Nothing is cached: freed memory goes back to the host at once, so
// "reserved" equals "allocated" and empty_cache() has nothing to return.
#include "shim.h"

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

namespace cudashim {
namespace {

constexpr size_t kRound = 512;
constexpr int kMaxDevices = 64;

// Totals only: what is allocated now is allocated_total - freed_total (blocks: num_alloc - num_free),
// so an allocation and a free cost two atomic additions each (every fallback output is one of each).
struct Counters {
  std::atomic<int64_t> allocated_total{0}, freed_total{0}, num_alloc{0}, num_free{0};
  std::atomic<int64_t> allocated_peak{0}, allocations_peak{0};
  int64_t allocated() const { return allocated_total.load() - freed_total.load(); }
  int64_t allocations() const { return num_alloc.load() - num_free.load(); }
};
std::array<Counters, kMaxDevices> g_stats;

void raise_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (value > p && !peak.compare_exchange_weak(p, value)) {
  }
}

void count_alloc(c10::DeviceIndex index, int64_t size) {
  auto& s = g_stats[index];
  const int64_t total = s.allocated_total.fetch_add(size) + size;
  const int64_t blocks = s.num_alloc.fetch_add(1) + 1;
  raise_peak(s.allocated_peak, total - s.freed_total.load(std::memory_order_relaxed));
  raise_peak(s.allocations_peak, blocks - s.num_free.load(std::memory_order_relaxed));
}

void count_free(c10::DeviceIndex index, int64_t size) {
  auto& s = g_stats[index];
  s.freed_total.fetch_add(size);
  s.num_free.fetch_add(1);
}

// Every device block carries a header just below its data: the DataPtr's context is the data pointer
// itself, as raw_allocate()/raw_deallocate() require, and the deleter still knows the size and device.
constexpr size_t kHeader = 64;  // keeps the data 64-byte aligned
struct Header {
  int64_t size;
  int64_t device;
  uint64_t magic;  // kMagic while the block is ours and live
};
constexpr uint64_t kMagic = 0x63756461736869ULL;  // "cudashi"


Header* header_of(void* data) { return reinterpret_cast<Header*>(static_cast<char*>(data) - kHeader); }

void release(void* data) {
  if (data == nullptr) return;
  Header* h = header_of(data);
  TORCH_INTERNAL_ASSERT(h->magic == kMagic, "cudashim: device memory freed twice or not ours");
  h->magic = 0;
  if (h->device >= 0) count_free(static_cast<c10::DeviceIndex>(h->device), h->size);
  c10::free_cpu(h);
}

void* allocate_raw(c10::DeviceIndex index, size_t n) {
  const int64_t size = index >= 0 ? static_cast<int64_t>((n + kRound - 1) / kRound * kRound) : static_cast<int64_t>(n);
  auto* h = static_cast<Header*>(c10::alloc_cpu(static_cast<size_t>(size) + kHeader));
  h->size = size;
  h->device = index;
  h->magic = kMagic;
  if (index >= 0) count_alloc(index, size);
  return reinterpret_cast<char*>(h) + kHeader;
}

// Device memory (index >= 0) or host memory (index < 0); `as` is the device the DataPtr reports
// (the device itself).
c10::DataPtr allocate_on(c10::DeviceIndex index, size_t n, c10::Device as) {
  if (n == 0) return c10::DataPtr(nullptr, nullptr, &release, as);
  void* p = allocate_raw(index, n);
  return c10::DataPtr(p, p, &release, as);
}

struct DeviceAllocator final : c10::Allocator {
  c10::DeviceIndex index = -1;  // -1: the calling thread's current device
  c10::DataPtr allocate(size_t n) override {
    const auto i = check_index(index);
    return allocate_on(i, n, c10::Device(kType, i));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dst, const void* src, size_t n) const override { std::memcpy(dst, src, n); }
};

std::array<DeviceAllocator, kMaxDevices + 1> g_device_allocators;  // [0] is "current device"

// Pinned host memory: ordinary host memory the device remembers, so is_pinned() can answer.
std::mutex g_pinned_mutex;
std::unordered_set<const void*> g_pinned;
std::atomic<int64_t> g_pinned_bytes{0};

struct PinnedBlock {
  void* ptr;
  int64_t size;
};

void release_pinned(void* ctx) {
  auto* b = static_cast<PinnedBlock*>(ctx);
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(b->ptr);
  }
  g_pinned_bytes.fetch_sub(b->size);
  c10::free_cpu(b->ptr);
  delete b;
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
    void* p = c10::alloc_cpu(n);
    {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_pinned.insert(p);
    }
    g_pinned_bytes.fetch_add(static_cast<int64_t>(n));
    return c10::DataPtr(p, new PinnedBlock{p, static_cast<int64_t>(n)}, &release_pinned, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dst, const void* src, size_t n) const override { std::memcpy(dst, src, n); }
};
PinnedAllocator g_pinned_allocator;

// What the CPU allocator's DataPtrs carry: a fallback's outputs are allocated by the CPU kernels
// through it, then adopted as device memory (adopt()) and freed by its own deleter.
c10::DeleterFnPtr g_cpu_deleter = nullptr;

struct Adopted {
  void* ptr;
  int64_t size;
  c10::DeviceIndex device;
};

void release_adopted(void* ctx) {
  auto* a = static_cast<Adopted*>(ctx);
  count_free(a->device, a->size);
  g_cpu_deleter(a->ptr);
  delete a;
}

}  // namespace

c10::Allocator* device_allocator(c10::DeviceIndex index) {
  auto& a = g_device_allocators[index < 0 ? 0 : index + 1];
  a.index = index < 0 ? -1 : index;
  return &a;
}
c10::Allocator* pinned_allocator() { return &g_pinned_allocator; }

bool is_pinned_ptr(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  return g_pinned.count(ptr) != 0;
}

DeviceStats device_stats(c10::DeviceIndex index) {
  const auto& s = g_stats[check_index(index)];
  DeviceStats d;
  d.allocated = s.allocated();
  d.allocated_peak = s.allocated_peak;
  d.allocations = s.allocations();
  d.allocations_peak = s.allocations_peak;
  d.allocated_total = s.allocated_total;
  d.freed_total = s.freed_total;
  d.num_alloc = s.num_alloc;
  d.num_free = s.num_free;
  return d;
}

void reset_peak(c10::DeviceIndex index) {
  auto& s = g_stats[check_index(index)];
  s.allocated_peak = s.allocated();
  s.allocations_peak = s.allocations();
}

int64_t pinned_bytes() { return g_pinned_bytes; }

bool adopt(c10::DataPtr& dp, size_t nbytes, c10::DeviceIndex index) {
  if (g_cpu_deleter == nullptr || dp.get() == nullptr || dp.get() != dp.get_context() ||
      dp.get_deleter() != g_cpu_deleter) {
    return false;  // not plain CPU-allocator memory: the caller keeps it alive instead
  }
  const int64_t size = static_cast<int64_t>((nbytes + kRound - 1) / kRound * kRound);
  count_alloc(index, size);
  void* p = dp.release_context();
  dp = c10::DataPtr(p, new Adopted{p, size, index}, &release_adopted, c10::Device(kType, index));
  return true;
}

void install_allocators() {
  if (g_cpu_deleter != nullptr) return;
  g_cpu_deleter = c10::GetCPUAllocator()->raw_deleter();
  c10::SetAllocator(kType, device_allocator(-1), /*priority=*/1);
}

}  // namespace cudashim
