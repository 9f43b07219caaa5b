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

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <unordered_set>
#include <vector>

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
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

// Out-of-memory bounds (shim.h): capacity 0 until install_allocators() sets the host's memory
std::array<std::atomic<int64_t>, kMaxDevices> g_capacity{};
std::array<std::atomic<double>, kMaxDevices> g_fraction{};
std::array<std::atomic<int64_t>, kMaxDevices> g_ooms{};
std::atomic<double> g_reject_fraction{-1.0};
std::array<std::atomic<int64_t>, kMaxDevices> g_rejections{};
bool g_reserve_on_demand = false;

// the bytes device `index` may hold: its capacity, or the share a memory fraction below 1 allows
int64_t allowed_bytes(c10::DeviceIndex index) {
  const double f = g_fraction[index].load();
  const int64_t cap = g_capacity[index].load();
  return f < 1.0 ? static_cast<int64_t>(f * static_cast<double>(cap)) : cap;
}

// The preflight's observer (shim.h): told of each new peak and each new largest request per device
std::atomic<MemoryObserver> g_observer{nullptr};
std::array<std::atomic<int64_t>, kMaxDevices> g_seen_allocated{}, g_seen_reserved{}, g_seen_largest{};

void observe(c10::DeviceIndex index, int64_t n) {
  const MemoryObserver fn = g_observer.load(std::memory_order_relaxed);
  if (fn == nullptr) return;
  if (n > g_seen_largest[index].load()) {
    g_seen_largest[index] = n;
    fn(index, kLargest, n);
  }
  const DeviceStats d = device_stats(index);
  if (d.allocated > g_seen_allocated[index].load()) {
    g_seen_allocated[index] = d.allocated;
    fn(index, kAllocatedPeak, d.allocated);
  }
  if (d.reserved > g_seen_reserved[index].load()) {
    g_seen_reserved[index] = d.reserved;
    fn(index, kReservedPeak, d.reserved);
  }
}

// CUDA's (or torch_npu's) out-of-memory error, worded as c10/cuda/CUDACachingAllocator.cpp words it
[[noreturn]] void raise_oom(c10::DeviceIndex index, int64_t alloc_size, int64_t allocated, int64_t reserved) {
  using c10::CachingAllocator::format_size;
  if (const MemoryObserver fn = g_observer.load()) fn(index, kOutOfMemory, alloc_size);
  const int64_t cap = g_capacity[index].load();
  const auto free = static_cast<uint64_t>(std::max<int64_t>(0, cap - reserved));
  const double f = g_fraction[index].load();
  const std::string allowed = f < 1.0 ? format_size(static_cast<uint64_t>(allowed_bytes(index))) + " allowed; " : "";
  std::ostringstream msg;
  if (kType == c10::DeviceType::CUDA) {
    msg << "CUDA out of memory. Tried to allocate " << format_size(alloc_size) << ". GPU " << static_cast<int>(index)
        << " has a total capacity of " << format_size(cap) << " of which " << format_size(free) << " is free. "
        << "Including non-PyTorch memory, this process has " << format_size(reserved) << " memory in use. " << allowed
        << "Of the allocated memory " << format_size(allocated) << " is allocated by PyTorch, and "
        << format_size(reserved - allocated) << " is reserved by PyTorch but unallocated."
        << " If reserved but unallocated memory is large try setting"
        << " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
           "Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-"
           "cuda-alloc-conf)";
  } else {  // torch_npu's NPUCachingAllocator.cpp
    msg << "NPU out of memory. Tried to allocate " << format_size(alloc_size) << " (NPU " << static_cast<int>(index)
        << "; " << format_size(cap) << " total capacity; " << format_size(allocated) << " already allocated; "
        << format_size(allocated) << " current active; " << format_size(free) << " free; " << allowed
        << format_size(reserved) << " reserved in total by PyTorch)."
        << "If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.";
  }
  TORCH_CHECK_WITH(OutOfMemoryError, false, msg.str());
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
  void* model;       // its block in the caching-allocator model (cache_model.cpp), while live
  int64_t mapped;    // 1: an mmap of its own (reserve on demand), unmapped when released
  int64_t mempool;   // the private pool (pools.cpp) it was allocated to, or 0
};
static_assert(sizeof(Header) <= kHeader, "the header must fit below the data");
constexpr uint64_t kMagic = 0x63756461736869ULL;  // "cudashi"
constexpr uint64_t kCached = 0x6361636865640aULL;
constexpr uint64_t kPoolKept = 0x706f6f6c6b6570ULL;  // freed into a private pool, which keeps it

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

// Blocks of at most this size are not cached (cached_size()) and are taken as written
constexpr int64_t kSmall = int64_t{128} << 10;

// The large blocks the devices hold from the host: the host counts a page of one as used only once
// it is written, while a device has taken all of it, as cudaMalloc takes it (untouched_bytes()).
std::mutex g_large_mutex;
std::unordered_set<Header*> g_large;

void hold_large(Header* h) {
  if (h->capacity <= kSmall) return;
  std::lock_guard<std::mutex> lock(g_large_mutex);
  g_large.insert(h);
}

void release_block(Header* h) {
  if (h->capacity > kSmall) {
    std::lock_guard<std::mutex> lock(g_large_mutex);
    g_large.erase(h);
  }
  auto& s = g_stats[h->pool];
  s.held_released.fetch_add(h->capacity);
  s.held_num_free.fetch_add(1);
  h->magic = 0;
  if (h->mapped != 0) {
    munmap(h, static_cast<size_t>(h->capacity) + kHeader);
  } else {
    c10::free_cpu(h);
  }
}

// Blocks of at most 128 KiB are not cached: the host's malloc keeps freed chunks of that size in its
// heap and hands the warmest back to the next request of any size, while a cache of size classes
// spreads a loop's small tensors over one block per class: a larger working set, which makes every
// library slower, Python included. What caching is for is kept: blocks the host would map and
// unmap each time (glibc maps from 128 KiB up), each a page fault per page.
bool cached_size(int64_t size) { return g_caching && size > kSmall; }

// capacity bytes and a header from the host, or nullptr when it refuses
Header* host_block(int64_t capacity) {
  const size_t n = static_cast<size_t>(capacity) + kHeader;
  if (g_reserve_on_demand && capacity > kSmall) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    static_cast<Header*>(p)->mapped = 1;
    return static_cast<Header*>(p);
  }
  try {
    auto* h = static_cast<Header*>(c10::alloc_cpu(n));
    h->mapped = 0;
    return h;
  } catch (const c10::Error&) {
    return nullptr;
  }
}

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
  auto& st = g_stats[pool];
  // the model (when active) has decided whether the request fits the device; else the bound is checked
  // here against what the device holds, after giving the cache back once, as CUDA's allocator does
  if (!model_active() && st.reserved() + capacity > allowed_bytes(pool)) {
    empty_cache();
    if (st.reserved() + capacity > allowed_bytes(pool)) {
      g_ooms[pool].fetch_add(1);
      raise_oom(pool, model_allocation_size(size), st.allocated(), st.reserved());  // the size CUDA would ask for
    }
  }
  const double reject = g_reject_fraction.load();
  if (reject >= 0 && st.reserved() + capacity > static_cast<int64_t>(reject * static_cast<double>(g_capacity[pool].load()))) {
    g_rejections[pool].fetch_add(1);
    TORCH_CHECK_WITH(OutOfMemoryError, false,
                     "NPU out of memory. Allocation was preemptively rejected because it would exceed "
                     "per_process_memory_fraction limit. Requested size: ",
                     c10::CachingAllocator::format_size(static_cast<uint64_t>(capacity)));
  }
  Header* h = host_block(capacity);
  if (h == nullptr) {  // the host refused: give the cache back, then try once more
    empty_cache();
    h = host_block(capacity);
  }
  if (h == nullptr) {
    g_ooms[pool].fetch_add(1);
    raise_oom(pool, model_allocation_size(size), st.allocated(), st.reserved());
  }
  h->capacity = capacity;
  h->pool = pool;
  hold_large(h);
  auto& s = g_stats[pool];
  s.held_total.fetch_add(capacity);
  s.held_num_alloc.fetch_add(1);
  return h;
}

// A block of `n` bytes from `pool`'s cache, counted in its memory_allocated().
void* allocate_block(c10::DeviceIndex pool, size_t n) {
  const int64_t size = round_up(n);
  void* model = nullptr;
  if (model_active() && !graph_replaying()) {  // a replay's transient buffers: CUDA's replay allocates nothing
    model = model_malloc(pool, n, g_capacity[pool].load(), allowed_bytes(pool));
    if (model == nullptr) {
      const ModelStats m = model_stats(pool);
      g_ooms[pool].fetch_add(1);
      raise_oom(pool, model_allocation_size(n), m.stat[4 * 3].current, m.stat[5 * 3].current);
    }
  }
  Header* h = nullptr;
  try {
    h = take(pool, size);
  } catch (...) {
    if (model != nullptr) model_free(pool, model);
    throw;
  }
  h->magic = kMagic;
  h->counted = size;
  h->model = model;
  h->mempool = mempool_take(pool, data_of(h), data_of(h), false);
  auto& s = g_stats[pool];
  s.own_total.fetch_add(size);
  s.own_num_alloc.fetch_add(1);
  count_alloc(pool, size);
  observe(pool, static_cast<int64_t>(n));
  return data_of(h);
}

// a block no longer counted in memory_allocated() (freed, or kept by a private pool)
void uncount(Header* h) {
  auto& s = g_stats[h->pool];
  s.own_freed.fetch_add(h->counted);
  s.own_num_free.fetch_add(1);
  count_free(static_cast<c10::DeviceIndex>(h->pool), h->counted);
  if (h->model != nullptr) {
    model_free(static_cast<c10::DeviceIndex>(h->pool), h->model);
    h->model = nullptr;
  }
}

// an uncounted block back to its device's cache, or to the host
void recycle(Header* h) {
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

void give_back(Header* h) {
  TORCH_INTERNAL_ASSERT(h->magic == kMagic || h->magic == kPoolKept, "cudashim: device memory freed twice or not ours");
  if (h->mempool != 0 && mempool_owner_gone(h->mempool, data_of(h))) return;  // its pool keeps it
  if (h->magic == kMagic) uncount(h);  // (a pool's block it had uncounted is not counted twice)
  recycle(h);
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

// c10's DeviceStats of a device, as memory.py's MemoryTable.nested() reports them to torch.cuda /
// torch_npu's memory_stats(), so torch.accelerator.memory_stats() answers the same
c10::CachingDeviceAllocator::DeviceStats full_device_stats(c10::DeviceIndex device) {
  using c10::CachingAllocator::Stat;
  using c10::CachingAllocator::StatArray;
  const auto i = check_index(device);
  c10::CachingDeviceAllocator::DeviceStats out;
  out.max_split_size = -1;
  if (model_active()) {
    const ModelStats m = model_stats(i);
    StatArray* arrays[] = {&out.allocation, &out.segment, &out.active, &out.inactive_split, &out.allocated_bytes,
                           &out.reserved_bytes, &out.active_bytes, &out.inactive_split_bytes, &out.requested_bytes};
    for (int k = 0; k < 9; ++k) {
      for (int p = 0; p < 3; ++p) {  // the model's pools and c10's StatType: all, small, large
        const auto& src = m.stat[k * 3 + p];
        Stat& dst = (*arrays[k])[p];
        dst.current = src.current;
        dst.peak = src.peak;
        dst.allocated = src.allocated;
        dst.freed = src.freed;
      }
    }
    out.num_alloc_retries = m.num_alloc_retries;
    out.num_ooms = m.num_ooms;
    out.num_device_alloc = m.num_device_alloc;
    out.num_device_free = m.num_device_free;
    return out;
  }
  const DeviceStats s = device_stats(i);
  auto fill = [](StatArray& a, int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
    for (int p : {0, 2}) {  // one pool (blocks are never split): everything in the large pool
      a[p].current = current;
      a[p].peak = peak;
      a[p].allocated = allocated;
      a[p].freed = freed;
    }
  };
  for (StatArray* a : {&out.allocated_bytes, &out.active_bytes, &out.requested_bytes}) {
    fill(*a, s.allocated, s.allocated_peak, s.allocated_total, s.freed_total);
  }
  for (StatArray* a : {&out.allocation, &out.active}) fill(*a, s.allocations, s.allocations_peak, s.num_alloc, s.num_free);
  fill(out.reserved_bytes, s.reserved, s.reserved_peak, s.reserved_total, s.released_total);
  fill(out.segment, s.segments, s.segments_peak, s.num_segment_alloc, s.num_segment_free);
  out.num_ooms = g_ooms[i].load();
  out.num_device_alloc = s.num_segment_alloc;
  out.num_device_free = s.num_segment_free;
  return out;
}

// (free, total) of a device as the device module answers mem_get_info() (set_memory_info_source)
MemoryInfoSource g_memory_info = nullptr;

std::pair<size_t, size_t> memory_info(c10::DeviceIndex index) {
  TORCH_CHECK(g_memory_info != nullptr, "cudashim: the device's memory information is not available yet");
  return g_memory_info(index);
}

// A c10::DeviceAllocator, as torch_npu's NPUCachingAllocator and CUDA's are: torch.accelerator's
// memory functions (c10::getDeviceAllocator) reach the device's statistics through it.
struct DeviceAllocator final : c10::DeviceAllocator {
  c10::DeviceIndex index = -1;  // -1: the calling thread's current device
  c10::DataPtr allocate(size_t n) override {
    const auto i = check_index(index);
    return allocate_on(i, n, c10::Device(kType, i));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dst, const void* src, size_t n) const override { std::memcpy(dst, src, n); }
  bool initialized() override { return true; }  // installed with the device, before any tensor
  void emptyCache(c10::MempoolId_t) override { empty_cache(); }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // nothing is freed early (kernels.cpp)
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return full_device_stats(device);
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    const auto i = check_index(device);
    if (model_active()) model_reset_accumulated(i);  // without the model the totals only grow, as memory.py says
  }
  void resetPeakStats(c10::DeviceIndex device) override { reset_peak(device); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override { return memory_info(check_index(device)); }
};

std::array<DeviceAllocator, kMaxDevices + 1> g_device_allocators;  // [0] is "current device"

// Pinned host memory: ordinary host memory the device remembers, so is_pinned() can answer.
std::mutex g_pinned_mutex;
std::unordered_set<const void*> g_pinned;
std::atomic<int64_t> g_pinned_bytes{0};

struct PinnedBlock {
  void* ptr;
  int64_t size;   // what was asked for
  int64_t block;  // the block that holds it
};

// Pinned memory is cached as torch_npu's caching host allocator (c10's CachingHostAllocatorImpl) caches
// it: a request rounded up to a power of two unless it is above pinned_max_round_threshold or
// pinned_max_cached_size; a freed block stays cached (counted in allocations and allocated_bytes) in the
// free list of its size class, and the next request of that class takes it back, the same memory, until
// empty_host_cache() returns it; a block above pinned_max_cached_size goes back to the host when freed.
struct HostStats {
  std::mutex mutex;
  std::array<std::vector<std::pair<void*, int64_t>>, 64> blocks;  // cached blocks per size class, with their sizes
  PinnedStats s;
} g_host;

std::atomic<int64_t> g_round_threshold{std::numeric_limits<int64_t>::max()};
std::atomic<int64_t> g_max_cached{std::numeric_limits<int64_t>::max()};

int log2_ceil(int64_t n) { return n <= 1 ? 0 : 64 - __builtin_clzll(static_cast<uint64_t>(n - 1)); }

void host_stat(PinnedStats::Stat& st, int64_t amount) {
  st.current += amount;
  if (amount >= 0) {
    st.allocated += amount;
    st.peak = std::max(st.peak, st.current);
  } else {
    st.freed -= amount;
  }
}

void host_duration(PinnedStats::Duration& d, std::chrono::steady_clock::time_point start) {
  const int64_t us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  d.total += us;
  d.count += 1;
  d.max = std::max(d.max, us);
  d.min = d.min == 0 ? us : std::min(d.min, us);
}

// a block of size bytes back to the host, counted in the statistics (g_host.mutex held)
void host_freed(void* p, int64_t size) {
  const auto start = std::chrono::steady_clock::now();
  c10::free_cpu(p);
  host_duration(g_host.s.host_free_time, start);
  host_stat(g_host.s.allocations, -1);
  host_stat(g_host.s.allocated_bytes, -size);
  g_host.s.num_host_free += 1;
}

// a block for n bytes: a cached one of its size class, else new memory from the host; *block is its size
void* host_taken(int64_t n, int64_t* block) {
  const int64_t size = n <= g_round_threshold.load() && n <= g_max_cached.load() ? int64_t{1} << log2_ceil(n) : n;
  auto& cached = g_host.blocks[log2_ceil(size)];
  {
    std::lock_guard<std::mutex> lock(g_host.mutex);
    for (auto it = cached.rbegin(); it != cached.rend(); ++it) {
      if (it->second >= size) {
        void* p = it->first;
        *block = it->second;
        cached.erase(std::next(it).base());
        host_stat(g_host.s.active_requests, 1);
        host_stat(g_host.s.active_bytes, *block);
        return p;
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  void* p = c10::alloc_cpu(static_cast<size_t>(size));
  *block = size;
  std::lock_guard<std::mutex> lock(g_host.mutex);
  host_duration(g_host.s.host_alloc_time, start);
  host_stat(g_host.s.allocations, 1);
  host_stat(g_host.s.allocated_bytes, size);
  g_host.s.num_host_alloc += 1;
  host_stat(g_host.s.active_requests, 1);
  host_stat(g_host.s.active_bytes, size);
  return p;
}

void host_given_back(void* p, int64_t block) {
  const bool keep = block <= g_max_cached.load();
  std::lock_guard<std::mutex> lock(g_host.mutex);
  host_stat(g_host.s.active_requests, -1);
  host_stat(g_host.s.active_bytes, -block);
  if (keep) {
    g_host.blocks[log2_ceil(block)].emplace_back(p, block);
    return;
  }
  host_freed(p, block);
}

void release_pinned(void* ctx) {
  auto* b = static_cast<PinnedBlock*>(ctx);
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(b->ptr);
  }
  g_pinned_bytes.fetch_sub(b->size);
  host_given_back(b->ptr, b->block);
  delete b;
}

void empty_host_blocks();
at::HostStats host_allocator_stats();
void reset_host_stats(bool peaks);

// An at::HostAllocator, as torch_npu's caching host allocator is one (registered for its device):
// torch.accelerator.memory.empty_host_cache and the host statistics reach it through at::getHostAllocator.
struct PinnedAllocator final : at::HostAllocator {
  bool record_event(void*, void*, c10::Stream) override { return true; }  // the device ran the copy as issued
  void empty_cache() override { empty_host_blocks(); }
  at::HostStats get_stats() override { return host_allocator_stats(); }
  void reset_accumulated_stats() override { reset_host_stats(false); }
  void reset_peak_stats() override { reset_host_stats(true); }
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
    int64_t block = 0;
    void* p = host_taken(static_cast<int64_t>(n), &block);
    {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_pinned.insert(p);
    }
    g_pinned_bytes.fetch_add(static_cast<int64_t>(n));
    return c10::DataPtr(p, new PinnedBlock{p, static_cast<int64_t>(n), block}, &release_pinned, c10::Device(c10::kCPU));
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
  void* model;  // its block in the caching-allocator model, when active
  int64_t mempool;  // the private pool (pools.cpp) it was allocated to, or 0
};

void release_adopted(void* ctx) {
  auto* a = static_cast<Adopted*>(ctx);
  if (a->mempool != 0 && mempool_owner_gone(a->mempool, a->ptr)) return;  // its pool keeps it
  if (a->model != nullptr) model_free(a->device, a->model);
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
  index = check_index(index);
  const auto& s = g_stats[index];
  DeviceStats d;
  if (model_active()) {  // what CUDA's caching allocator would report (aggregate pool)
    const ModelStats m = model_stats(index);
    const auto& alloc = m.stat[0], &seg = m.stat[3], &bytes = m.stat[4 * 3], &res = m.stat[5 * 3];
    d.allocated = bytes.current;
    d.allocated_peak = bytes.peak;
    d.allocations = alloc.current;
    d.allocations_peak = alloc.peak;
    d.allocated_total = bytes.allocated;
    d.freed_total = bytes.freed;
    d.num_alloc = alloc.allocated;
    d.num_free = alloc.freed;
    d.reserved = res.current;
    d.reserved_peak = res.peak;
    d.segments = seg.current;
    d.segments_peak = seg.peak;
    d.reserved_total = res.allocated;
    d.released_total = res.freed;
    d.num_segment_alloc = seg.allocated;
    d.num_segment_free = seg.freed;
    return d;
  }
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
  index = check_index(index);
  auto& s = g_stats[index];
  model_reset_peak(index);
  s.allocated_peak = s.allocated();
  s.allocations_peak = s.allocations();
  s.reserved_peak = s.reserved();
  s.segments_peak = s.segments();
}

void empty_cache() {
  if (model_active()) model_empty_cache();
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
  void* model = nullptr;
  if (model_active() && !graph_replaying()) {  // a GPU kernel would have allocated its output from the caching allocator
    model = model_malloc(index, nbytes, g_capacity[index].load(), allowed_bytes(index));
    if (model == nullptr) {
      const ModelStats m = model_stats(index);
      g_ooms[index].fetch_add(1);
      raise_oom(index, model_allocation_size(nbytes), m.stat[4 * 3].current, m.stat[5 * 3].current);
    }
  }
  if (model == nullptr && !model_active()) {  // the bound take() checks for the device's own blocks
    auto& st = g_stats[index];
    if (st.reserved() + size > allowed_bytes(index)) {
      empty_cache();
      if (st.reserved() + size > allowed_bytes(index)) {
        g_ooms[index].fetch_add(1);
        raise_oom(index, model_allocation_size(nbytes), st.allocated(), st.reserved());  // dp still frees it
      }
    }
  }
  count_alloc(index, size);  // reserved too while it lives (Counters), not cached when freed
  void* p = dp.release_context();
  auto* a = new Adopted{p, size, index, model, 0};
  dp = c10::DataPtr(p, a, &release_adopted, c10::Device(kType, index));
  a->mempool = mempool_take(index, p, a, true);
  observe(index, static_cast<int64_t>(nbytes));
  return true;
}

int64_t untouched_bytes() {
  const int64_t page = sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident;
  int64_t untouched = 0;
  std::lock_guard<std::mutex> lock(g_large_mutex);
  for (Header* h : g_large) {
    const auto begin = reinterpret_cast<uintptr_t>(data_of(h));
    const auto end = begin + static_cast<uintptr_t>(h->capacity);
    // whole pages inside the block: a page it shares with its neighbour counts as written
    const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    if (last <= first) continue;
    const size_t pages = (last - first) / page;
    resident.resize(pages);
    if (mincore(reinterpret_cast<void*>(first), last - first, resident.data()) != 0) continue;
    for (size_t i = 0; i < pages; ++i) untouched += (resident[i] & 1) ? 0 : page;
  }
  return untouched;
}

void host_refused(c10::DeviceIndex index, const c10::Error& e) {
  // c10's alloc_cpu: "DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes. ..."
  const std::string& msg = e.msg();
  const std::string mark = "can't allocate memory: you tried to allocate ";
  const auto at = msg.find(mark);
  if (at == std::string::npos) return;
  const int64_t n = std::strtoll(msg.c_str() + at + mark.size(), nullptr, 10);
  if (n <= 0) return;
  index = check_index(index);
  const auto size = static_cast<size_t>(n);
  if (model_active()) {  // the caching-allocator model refuses it as CUDA would, counting it in its statistics
    if (void* model = model_malloc(index, size, g_capacity[index].load(), allowed_bytes(index))) {
      model_free(index, model);  // the device would grant it: the host alone refuses
    } else {
      const ModelStats m = model_stats(index);
      g_ooms[index].fetch_add(1);
      raise_oom(index, model_allocation_size(size), m.stat[4 * 3].current, m.stat[5 * 3].current);
    }
  }
  g_ooms[index].fetch_add(1);
  const DeviceStats d = device_stats(index);
  raise_oom(index, model_allocation_size(size), d.allocated, d.reserved);
}

void install_allocators() {
  if (g_cpu_deleter != nullptr) return;
  g_cpu_deleter = c10::GetCPUAllocator()->raw_deleter();
  const char* off = std::getenv(kType == c10::DeviceType::CUDA ? "PYTORCH_NO_CUDA_MEMORY_CACHING" : "PYTORCH_NO_NPU_MEMORY_CACHING");
  g_caching = off == nullptr || std::strcmp(off, "1") != 0;
  const int64_t host = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  g_cache_limit = host / 8;
  for (int i = 0; i < kMaxDevices; ++i) {
    g_capacity[i] = host;  // the device's memory is the host's until a profile (or Python) says otherwise
    g_fraction[i] = 1.0;
  }
  c10::SetAllocator(kType, device_allocator(-1), /*priority=*/1);
  at::setHostAllocator(kType, &g_pinned_allocator, /*priority=*/1);
}

}  // namespace cudashim

namespace cudashim {

void set_memory_capacity(c10::DeviceIndex index, int64_t bytes) {
  TORCH_CHECK(bytes > 0, "cudashim: a device's memory capacity must be positive, got ", bytes);
  g_capacity[check_index(index)] = bytes;
}
int64_t memory_capacity(c10::DeviceIndex index) { return g_capacity[check_index(index)].load(); }

void set_memory_fraction(c10::DeviceIndex index, double fraction) {
  TORCH_CHECK(fraction >= 0 && fraction <= 1, "invalid fraction:", fraction, ". Please set within [0, 1].");
  g_fraction[check_index(index)] = fraction;
}
double memory_fraction(c10::DeviceIndex index) {
  const auto i = check_index(index);
  const double f = g_fraction[i].load();
  return f < 1.0 ? static_cast<double>(allowed_bytes(i)) / static_cast<double>(g_capacity[i].load()) : 1.0;
}
int64_t num_ooms(c10::DeviceIndex index) { return g_ooms[check_index(index)].load(); }
void set_oom_rejection(double fraction) { g_reject_fraction = fraction; }
int64_t oom_rejections(c10::DeviceIndex index) { return g_rejections[check_index(index)].load(); }
void reset_oom_rejections(c10::DeviceIndex index) { g_rejections[check_index(index)] = 0; }
void set_reserve_on_demand(bool on) { g_reserve_on_demand = on; }
void set_memory_info_source(MemoryInfoSource fn) { g_memory_info = fn; }
void set_memory_observer(MemoryObserver fn) {
  for (int i = 0; i < kMaxDevices; ++i) g_seen_allocated[i] = g_seen_reserved[i] = g_seen_largest[i] = 0;
  g_observer = fn;
}

}  // namespace cudashim

namespace cudashim {

PinnedStats pinned_stats() {
  std::lock_guard<std::mutex> lock(g_host.mutex);
  return g_host.s;
}

namespace {
void empty_host_blocks() { empty_host_cache(); }

at::HostStats host_allocator_stats() {
  const PinnedStats p = pinned_stats();
  auto copy = [](at::Stat& to, const PinnedStats::Stat& from) {
    to.current = from.current;
    to.peak = from.peak;
    to.allocated = from.allocated;
    to.freed = from.freed;
  };
  at::HostStats out;
  copy(out.allocations, p.allocations);
  copy(out.allocated_bytes, p.allocated_bytes);
  copy(out.active_requests, p.active_requests);
  copy(out.active_bytes, p.active_bytes);
  out.num_host_alloc = p.num_host_alloc;
  out.num_host_free = p.num_host_free;
  for (auto [to, from] : {std::pair{&out.host_alloc_time, &p.host_alloc_time}, {&out.host_free_time, &p.host_free_time}}) {
    to->total = from->total;
    to->max = from->max;
    to->min = from->min;
    to->count = from->count;
  }
  return out;
}

void reset_host_stats(bool peaks) {
  std::lock_guard<std::mutex> lock(g_host.mutex);
  for (PinnedStats::Stat* st : {&g_host.s.allocations, &g_host.s.allocated_bytes, &g_host.s.active_requests,
                                &g_host.s.active_bytes}) {
    if (peaks) {
      st->peak = st->current;
    } else {
      st->allocated = st->freed = 0;
    }
  }
  for (PinnedStats::Duration* d : {&g_host.s.host_alloc_time, &g_host.s.host_free_time}) {
    if (peaks) {
      d->min = d->max = 0;
    } else {
      d->total = d->count = 0;
    }
  }
  if (!peaks) g_host.s.num_host_alloc = g_host.s.num_host_free = 0;
}
}  // namespace

void empty_host_cache() {
  std::lock_guard<std::mutex> lock(g_host.mutex);
  for (auto& cached : g_host.blocks) {
    for (const auto& [p, size] : cached) host_freed(p, size);
    cached.clear();
  }
}

void set_host_thresholds(int64_t round_threshold, int64_t max_cached) {
  g_round_threshold.store(round_threshold);
  g_max_cached.store(max_cached);
}

}  // namespace cudashim

namespace cudashim {

// A private pool's block (pools.cpp): counted in memory_allocated() while allocated in the pool's
// state; a block the pool keeps uncounted stays reserved (held) until it leaves the device.
void pool_block_count(void* ctx, bool adopted, bool on) {
  if (adopted) {
    auto* a = static_cast<Adopted*>(ctx);
    auto& s = g_stats[a->device];
    if (on) {
      count_alloc(a->device, a->size);
      s.held_released.fetch_add(a->size);
      s.held_num_free.fetch_add(1);
    } else {
      if (a->model != nullptr) model_free(a->device, a->model);
      a->model = nullptr;
      count_free(a->device, a->size);
      s.held_total.fetch_add(a->size);
      s.held_num_alloc.fetch_add(1);
    }
    return;
  }
  Header* h = header_of(ctx);
  if (on) {
    auto& s = g_stats[h->pool];
    s.own_total.fetch_add(h->counted);
    s.own_num_alloc.fetch_add(1);
    count_alloc(static_cast<c10::DeviceIndex>(h->pool), h->counted);
    h->magic = kMagic;
  } else {
    uncount(h);
    h->magic = kPoolKept;
  }
}

void pool_block_return(void* ctx, bool adopted) {
  if (adopted) {
    auto* a = static_cast<Adopted*>(ctx);
    auto& s = g_stats[a->device];
    s.held_released.fetch_add(a->size);
    s.held_num_free.fetch_add(1);
    g_cpu_deleter(a->ptr);
    delete a;
    return;
  }
  recycle(header_of(ctx));
}

c10::DataPtr pool_block_owner(void* ctx, bool adopted, c10::DeviceIndex device) {
  if (adopted) return c10::DataPtr(static_cast<Adopted*>(ctx)->ptr, ctx, &release_adopted, c10::Device(kType, device));
  return c10::DataPtr(ctx, ctx, &release, c10::Device(kType, device));
}

bool is_device_deleter(c10::DeleterFnPtr d) { return d == &release || d == &release_adopted; }

namespace {
// cuBLAS handles: each thread takes one per device from a pool and gives it back when it ends, as
// PyTorch's DeviceThreadHandlePool does; a workspace belongs to a (handle, stream) pair
std::mutex g_blas_mutex;
std::vector<int> g_idle_handles[kMaxDevices];
int g_handles[kMaxDevices] = {};
// (device, handle, stream) -> the workspace's model block: [0] cuBLAS, [1] cuBLASLt
std::map<std::tuple<int, int, c10::StreamId>, void*> g_workspaces[2];
std::atomic<int64_t> g_workspace_size[2] = {{0}, {0}};

struct HandleWindow {
  int handle[kMaxDevices];
  HandleWindow() { std::fill(std::begin(handle), std::end(handle), -1); }
  ~HandleWindow() {
    std::lock_guard<std::mutex> lock(g_blas_mutex);
    for (int d = 0; d < kMaxDevices; ++d) {
      if (handle[d] >= 0) g_idle_handles[d].push_back(handle[d]);
    }
  }
};
thread_local HandleWindow t_handles;

// held until clear_blas_workspaces(), as PyTorch's map holds it
void* workspace_block(c10::DeviceIndex index, int64_t n) {
  void* block = model_malloc(index, static_cast<size_t>(n), g_capacity[index].load(), allowed_bytes(index));
  if (block == nullptr) {
    const ModelStats m = model_stats(index);
    g_ooms[index].fetch_add(1);
    raise_oom(index, model_allocation_size(static_cast<size_t>(n)), m.stat[4 * 3].current, m.stat[5 * 3].current);
  }
  return block;
}
}  // namespace

void set_blas_workspace(int64_t cublas, int64_t cublaslt) {
  g_workspace_size[0] = cublas;
  g_workspace_size[1] = cublaslt;
}

void blas_call(bool lt) {
  if (!model_active() || graph_replaying() || g_workspace_size[0].load() <= 0) return;
  const c10::DeviceIndex d = current_device();
  const c10::StreamId s = current_stream_id(d);
  int handle = 0;
  bool need[2] = {false, false};
  {
    std::lock_guard<std::mutex> lock(g_blas_mutex);
    if (t_handles.handle[d] < 0) {
      if (g_idle_handles[d].empty()) {
        t_handles.handle[d] = g_handles[d]++;
      } else {
        t_handles.handle[d] = g_idle_handles[d].back();
        g_idle_handles[d].pop_back();
      }
    }
    handle = t_handles.handle[d];
    need[0] = g_workspaces[0].count({d, handle, s}) == 0;
    need[1] = lt && g_workspace_size[1].load() > 0 && g_workspaces[1].count({d, handle, s}) == 0;
  }
  // getCurrentCUDABlasHandle sets the handle's workspace first; cuBLASLt's follows
  for (int k : {0, 1}) {
    if (!need[k]) continue;
    void* block = workspace_block(d, g_workspace_size[k].load());
    std::lock_guard<std::mutex> lock(g_blas_mutex);
    if (!g_workspaces[k].emplace(std::make_tuple(static_cast<int>(d), handle, s), block).second) model_free(d, block);
  }
}

void clear_blas_workspaces() {  // at::cuda::clearCublasWorkspaces: every workspace goes back to the allocator
  std::map<std::tuple<int, int, c10::StreamId>, void*> held[2];
  {
    std::lock_guard<std::mutex> lock(g_blas_mutex);
    for (int k : {0, 1}) held[k].swap(g_workspaces[k]);
  }
  for (const auto& ws : held) {
    for (const auto& [key, block] : ws) model_free(static_cast<c10::DeviceIndex>(std::get<0>(key)), block);
  }
}

}  // namespace cudashim
