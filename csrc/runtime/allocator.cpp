// Host memory for the device, with CUDA-style statistics, and pinned host memory.
//
// Sizes are rounded up to 512 bytes as CUDA's caching allocator does, so memory_allocated() moves by
// the same amounts as on a GPU. Like CUDA's allocator, freed blocks larger than 128 KiB stay reserved
// and the next allocation of their size class takes them back, without asking the host: no malloc, no fresh
// pages to fault in (a serve loop re-allocates its KV reads and attention copies every step, and
// every fresh page is a page fault). empty_cache() gives the cached blocks back;
// PYTORCH_NO_CUDA_MEMORY_CACHING=1 (PYTORCH_NO_NPU_MEMORY_CACHING=1 for the simulated NPU) turns
// caching off, as it does on a GPU. The devices together cache at most an eighth of the host's
// memory; an allocation the host refuses first empties the cache and tries again, as CUDA's does.
//
// What the device allocator serves is cached: factories (empty, empty_like, zeros, ...) and the
// outputs of composite operators built on them (clone, contiguous, reshape's copy, cat). The CPU
// kernels the device runs (fallback.cpp, direct.cpp) allocate their outputs through the CPU's
// allocator (oneDNN frees what it gets there with the CPU's deleter, so its blocks must stay the
// CPU's); those are adopted (adopt()): counted in allocated and reserved while they live, given back
// to the host when freed.
#include "shim.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

namespace cudashim {
namespace {

constexpr size_t kRound = 512;

int64_t round_up(size_t n) { return static_cast<int64_t>((n + kRound - 1) / kRound * kRound); }

// Totals only: what is allocated now is allocated_total - freed_total (blocks: num_alloc - num_free),
// so an allocation and a free cost two atomic additions each (every fallback output is one of each).
// Reserved memory is what the device holds from the host: the cache's blocks (live or cached,
// "held") and the adopted CPU-kernel outputs while they live (allocated minus what the cache's own
// blocks count, "own"), so an adopted output costs nothing more.
struct Counters {
  std::atomic<int64_t> allocated_total{0}, freed_total{0}, num_alloc{0}, num_free{0};
  std::atomic<int64_t> allocated_peak{0}, allocations_peak{0};
  std::atomic<int64_t> own_total{0}, own_freed{0}, own_num_alloc{0}, own_num_free{0};
  std::atomic<int64_t> held_total{0}, held_released{0}, held_num_alloc{0}, held_num_free{0};
  std::atomic<int64_t> reserved_peak{0}, segments_peak{0};
  int64_t allocated() const { return allocated_total.load() - freed_total.load(); }
  int64_t allocations() const { return num_alloc.load() - num_free.load(); }
  int64_t reserved_total() const { return held_total.load() + allocated_total.load() - own_total.load(); }
  int64_t released_total() const { return held_released.load() + freed_total.load() - own_freed.load(); }
  int64_t segments_total() const { return held_num_alloc.load() + num_alloc.load() - own_num_alloc.load(); }
  int64_t segments_freed() const { return held_num_free.load() + num_free.load() - own_num_free.load(); }
  int64_t reserved() const { return reserved_total() - released_total(); }
  int64_t segments() const { return segments_total() - segments_freed(); }
};
std::array<Counters, kMaxDevices> g_stats;

void raise_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (value > p && !peak.compare_exchange_weak(p, value)) {
  }
}

void raise_reserved_peaks(Counters& s) {
  constexpr auto r = std::memory_order_relaxed;
  raise_peak(s.reserved_peak, s.held_total.load(r) - s.held_released.load(r) + s.allocated_total.load(r) -
                                  s.freed_total.load(r) - s.own_total.load(r) + s.own_freed.load(r));
  raise_peak(s.segments_peak, s.held_num_alloc.load(r) - s.held_num_free.load(r) + s.num_alloc.load(r) -
                                  s.num_free.load(r) - s.own_num_alloc.load(r) + s.own_num_free.load(r));
}

void count_alloc(c10::DeviceIndex index, int64_t size) {
  auto& s = g_stats[index];
  const int64_t total = s.allocated_total.fetch_add(size) + size;
  const int64_t blocks = s.num_alloc.fetch_add(1) + 1;
  raise_peak(s.allocated_peak, total - s.freed_total.load(std::memory_order_relaxed));
  raise_peak(s.allocations_peak, blocks - s.num_free.load(std::memory_order_relaxed));
  raise_reserved_peaks(s);  // loads only, unless a new peak
}

void count_free(c10::DeviceIndex index, int64_t size) {
  auto& s = g_stats[index];
  s.freed_total.fetch_add(size);
  s.num_free.fetch_add(1);
}

// Every device block carries a header just below its data, so the deleter knows its size, the
// device whose cache it returns to, and what it counts in memory_allocated().
constexpr size_t kHeader = 64;  // keeps the data 64-byte aligned
struct Header {
  int64_t capacity;  // bytes after the header: its size class
  int64_t pool;      // the device whose cache the block belongs to
  int64_t counted;   // the bytes it counts in memory_allocated()
  uint64_t magic;    // kMagic while the block is live
  Header* next;      // the next cached block of its class
};
constexpr uint64_t kMagic = 0x63756461736869ULL;  // "cudashi"
constexpr uint64_t kCached = 0x6361636865640aULL;

Header* header_of(void* data) { return reinterpret_cast<Header*>(static_cast<char*>(data) - kHeader); }
void* data_of(Header* h) { return reinterpret_cast<char*>(h) + kHeader; }

// Size classes: multiples of 512 bytes up to 4 KiB, then eight per power of two (9/8 ... 16/8 of
// the one below), so a block wastes less than an eighth and a loop whose sizes creep (a KV cache
// read one position longer every step) keeps taking the same few blocks back.
constexpr int kClasses = 8 + 8 * 52;
int size_class(int64_t size, int64_t* capacity) {
  if (size <= 4096) {
    *capacity = size;  // already a multiple of 512
    return static_cast<int>(size / 512) - 1;
  }
  const int e = 63 - __builtin_clzll(static_cast<uint64_t>(size - 1));  // 2^e < size <= 2^(e+1), e >= 12
  const int64_t step = int64_t{1} << (e - 3);
  const int64_t k = (size + step - 1) / step;  // 9..16
  *capacity = k * step;
  return 8 + 8 * (e - 12) + static_cast<int>(k - 9);
}

// One device's cache: a LIFO list per size class (the block freed last, warmest, is taken first).
struct Pool {
  std::mutex mutex;
  std::array<Header*, kClasses> free{};
  int64_t cached = 0;
};
std::array<Pool, kMaxDevices> g_pools;
bool g_caching = true;
int64_t g_cache_limit = 0;             // bytes cached by all devices together
std::atomic<int64_t> g_cached_total{0};

void release_block(Header* h) {
  auto& s = g_stats[h->pool];
  s.held_released.fetch_add(h->capacity);
  s.held_num_free.fetch_add(1);
  h->magic = 0;
  c10::free_cpu(h);
}

// Blocks of at most 128 KiB are not cached: the host's malloc keeps freed chunks of that size in its
// heap and hands the warmest back to the next request of any size, while a cache of size classes
// spreads a loop's small tensors over one block per class: a larger working set, which makes every
// library slower, Python included. What caching is for is kept: blocks the host would map and
// unmap each time (glibc maps from 128 KiB up), each a page fault per page.
constexpr int64_t kSmall = int64_t{128} << 10;
bool cached_size(int64_t size) { return g_caching && size > kSmall; }

Header* take(c10::DeviceIndex pool, int64_t size) {
  int64_t capacity = size;  // not cached: the size asked for
  if (cached_size(size)) {
    const int c = size_class(size, &capacity);
    Pool& p = g_pools[pool];
    std::lock_guard<std::mutex> lock(p.mutex);
    if (Header* h = p.free[c]) {
      p.free[c] = h->next;
      p.cached -= h->capacity;
      g_cached_total.fetch_sub(h->capacity);
      return h;
    }
  }
  Header* h = nullptr;
  try {
    h = static_cast<Header*>(c10::alloc_cpu(static_cast<size_t>(capacity) + kHeader));
  } catch (const c10::Error&) {  // as CUDA's allocator does: give the cache back, then try once more
    empty_cache();
    h = static_cast<Header*>(c10::alloc_cpu(static_cast<size_t>(capacity) + kHeader));
  }
  h->capacity = capacity;
  h->pool = pool;
  auto& s = g_stats[pool];
  s.held_total.fetch_add(capacity);
  s.held_num_alloc.fetch_add(1);
  return h;
}

// A block of `n` bytes from `pool`'s cache, counted in its memory_allocated().
void* allocate_block(c10::DeviceIndex pool, size_t n) {
  const int64_t size = round_up(n);
  Header* h = take(pool, size);
  h->magic = kMagic;
  h->counted = size;
  auto& s = g_stats[pool];
  s.own_total.fetch_add(size);
  s.own_num_alloc.fetch_add(1);
  count_alloc(pool, size);
  return data_of(h);
}

void give_back(Header* h) {
  TORCH_INTERNAL_ASSERT(h->magic == kMagic, "cudashim: device memory freed twice or not ours");
  auto& s = g_stats[h->pool];
  s.own_freed.fetch_add(h->counted);
  s.own_num_free.fetch_add(1);
  count_free(static_cast<c10::DeviceIndex>(h->pool), h->counted);
  h->magic = kCached;
  if (cached_size(h->capacity)) {
    Pool& p = g_pools[h->pool];
    int64_t capacity = 0;
    const int c = size_class(h->capacity, &capacity);  // the class it was made for
    std::lock_guard<std::mutex> lock(p.mutex);
    if (g_cached_total.fetch_add(h->capacity) + h->capacity <= g_cache_limit) {
      p.cached += h->capacity;
      h->next = p.free[c];
      p.free[c] = h;
      return;
    }
    g_cached_total.fetch_sub(h->capacity);
  }
  release_block(h);
}

// the deleter of the device's blocks (context == data, as raw_deallocate() requires)
void release(void* data) {
  if (data != nullptr) give_back(header_of(data));
}

// Device memory of `index`, its DataPtr reporting the device itself.
c10::DataPtr allocate_on(c10::DeviceIndex index, size_t n, c10::Device as) {
  if (n == 0) return c10::DataPtr(nullptr, nullptr, &release, as);
  void* p = allocate_block(index, n);
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
  d.reserved = s.reserved();
  d.reserved_peak = s.reserved_peak;
  d.segments = s.segments();
  d.segments_peak = s.segments_peak;
  d.reserved_total = s.reserved_total();
  d.released_total = s.released_total();
  d.num_segment_alloc = s.segments_total();
  d.num_segment_free = s.segments_freed();
  return d;
}

void reset_peak(c10::DeviceIndex index) {
  auto& s = g_stats[check_index(index)];
  s.allocated_peak = s.allocated();
  s.allocations_peak = s.allocations();
  s.reserved_peak = s.reserved();
  s.segments_peak = s.segments();
}

void empty_cache() {
  for (auto& p : g_pools) {
    std::array<Header*, kClasses> lists{};
    {
      std::lock_guard<std::mutex> lock(p.mutex);
      lists.swap(p.free);
      g_cached_total.fetch_sub(p.cached);
      p.cached = 0;
    }
    for (Header* h : lists) {
      while (h != nullptr) {
        Header* next = h->next;
        release_block(h);
        h = next;
      }
    }
  }
}

int64_t pinned_bytes() { return g_pinned_bytes; }

bool adopt(c10::DataPtr& dp, size_t nbytes, c10::DeviceIndex index) {
  if (g_cpu_deleter == nullptr || dp.get() == nullptr || dp.get() != dp.get_context() ||
      dp.get_deleter() != g_cpu_deleter) {
    return false;  // not plain CPU-allocator memory: the caller keeps it alive instead
  }
  const int64_t size = round_up(nbytes);
  count_alloc(index, size);  // reserved too while it lives (Counters), not cached when freed
  void* p = dp.release_context();
  dp = c10::DataPtr(p, new Adopted{p, size, index}, &release_adopted, c10::Device(kType, index));
  return true;
}

void install_allocators() {
  if (g_cpu_deleter != nullptr) return;
  g_cpu_deleter = c10::GetCPUAllocator()->raw_deleter();
  const char* off = std::getenv(kType == c10::DeviceType::CUDA ? "PYTORCH_NO_CUDA_MEMORY_CACHING" : "PYTORCH_NO_NPU_MEMORY_CACHING");
  g_caching = off == nullptr || std::strcmp(off, "1") != 0;
  g_cache_limit = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGESIZE)) / 8;
  c10::SetAllocator(kType, device_allocator(-1), /*priority=*/1);
}

}  // namespace cudashim
