// CUDA's caching allocator, modelled for its statistics (on while a device profile is active).
//
// The device's real memory keeps its own strategy (allocator.cpp); this file replays every device
// allocation and free through the bookkeeping of PyTorch's c10/cuda/CUDACachingAllocator.cpp, so
// memory_allocated(), memory_reserved(), memory_stats() and memory_snapshot() answer what a GPU
// would: sizes rounded to 512 bytes; a small pool (requests up to 1 MiB, served from 2 MiB
// segments) and a large pool (segments of 20 MiB under 10 MiB, else rounded up to 2 MiB); best fit
// by (size, address); a block split when the rest is at least 512 bytes (small pool) or more than
// 1 MiB (large pool); freed blocks merged with free neighbours; a request that finds no block and no
// room first gives back every unsplit cached segment, then fails as out of memory. The segments are
// address ranges only: nothing here holds memory.
//
// CUDA graphs' private pools: a request the device's allocator routes to a private pool (pools.cpp: a
// stream that a capture records, or a thread begun on the pool) is served from the model's pool of
// the same id (its own small and large blocks and segments, shared by the graphs given the same pool
// id), as beginAllocateToPool routes it. A pool lives while it has users (pools.cpp's: graphs, begun
// threads); once the last one goes its whole free segments go back at the next empty_cache(), and
// blocks still held by the program keep theirs. Its segments count in memory_reserved() meanwhile.
//
// Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): each pool's small and large
// blocks live in one segment of address space that grows by mapping pages (2 MiB small, 20 MiB
// large) as a request needs them, starting from the free mapped block just before the unmapped
// space; every block is split when 512 bytes or more remain; empty_cache() unmaps the whole pages
// inside free blocks. memory_reserved() is the mapped memory.
//
// Streams: as on a GPU, a block belongs to the stream current when its segment was allocated (blocks
// split from it too): a request is served only from free blocks of its own stream, and a stream with
// none gets a segment of its own (expandable segments: one per pool, stream and size class).
//
// Not modelled: max_split_size_mb, roundup_power2_divisions, and record_stream's deferred frees.
#include "shim.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_set>
#include <vector>

namespace cudashim {
namespace {

constexpr int64_t kMinBlockSize = 512;
constexpr int64_t kSmallSize = 1048576;
constexpr int64_t kSmallBuffer = 2097152;
constexpr int64_t kMinLargeAlloc = 10485760;
constexpr int64_t kRoundLarge = 2097152;
constexpr int64_t kLargeBuffer = 20971520;
constexpr int kMaxDevices = 64;

int64_t round_size(int64_t size) {
  return size < kMinBlockSize ? kMinBlockSize : kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

int64_t allocation_size(int64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

struct Block;
struct BySizeThenAddress {
  bool operator()(const Block* a, const Block* b) const;
};
using FreeBlocks = std::set<Block*, BySizeThenAddress>;

// the free blocks of one pool: [0] large, [1] small
struct ByAddress {
  bool operator()(const Block* a, const Block* b) const;
};

struct Pool {
  FreeBlocks free[2];
  std::set<Block*, ByAddress> unmapped[2];  // expandable segments: their unmapped address ranges
  std::set<int64_t> expandable[2];          // the streams whose expandable segment exists
  int use_count = 1;     // graphs using a private pool (beginAllocateToPool .. releasePool)
  int64_t segments = 0;  // segments it holds
  std::pair<uint64_t, uint64_t> id{0, 0};  // its MempoolId_t; (0, 0) for the default pool
};

struct Block {
  int64_t addr, size, requested = 0;
  bool small, allocated = false;
  Pool* pool = nullptr;
  int64_t stream = 0;  // the stream whose requests it serves
  Block* prev = nullptr;
  Block* next = nullptr;
  bool mapped = true;       // false: an expandable segment's address range with no memory behind it
  bool expandable = false;  // part of an expandable segment
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

bool ByAddress::operator()(const Block* a, const Block* b) const {
  return a->stream != b->stream ? a->stream < b->stream : a->addr < b->addr;
}

bool BySizeThenAddress::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  return a->size != b->size ? a->size < b->size : a->addr < b->addr;
}

struct Device {
  std::mutex mutex;
  Pool pool;                                                       // the default pool
  std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<Pool>> private_pools;  // CUDA graphs' pools
  std::unordered_set<Block*> active;
  std::array<ModelStats::Stat, 9 * 3> stat{};  // ModelStats' order
  int64_t num_alloc_retries = 0, num_ooms = 0, num_device_alloc = 0, num_device_free = 0;
  int64_t next_addr = int64_t{1} << 40;  // segment addresses: unique and ascending, as fresh device memory
  int64_t total_reserved = 0;            // what the segments hold from the device
};
std::array<Device, kMaxDevices> g_devices;
bool g_active = false;
bool g_expandable = false;
constexpr int64_t kExpandableSpace = int64_t{1} << 44;  // an expandable segment's address space

enum { kAllocation, kSegment, kActive, kInactiveSplit, kAllocatedBytes, kReservedBytes, kActiveBytes,
       kInactiveSplitBytes, kRequestedBytes };

void change(Device& d, int which, bool small, int64_t amount) {
  for (int pool : {0, small ? 1 : 2}) {  // aggregate, then the block's own pool
    auto& s = d.stat[which * 3 + pool];
    if (amount >= 0) {
      s.current += amount;
      s.allocated += amount;
      s.peak = std::max(s.peak, s.current);
    } else {
      s.current += amount;
      s.freed -= amount;
    }
  }
}

void release_segment(Device& d, FreeBlocks& blocks, Block* b) {
  d.total_reserved -= b->size;
  change(d, kSegment, b->small, -1);
  change(d, kReservedBytes, b->small, -b->size);
  d.num_device_free += 1;
  b->pool->segments -= 1;
  blocks.erase(b);
  delete b;
}

void unmap_free(Device& d, Pool& p, int small);

void release_whole(Device& d, Pool& pool) {
  for (auto& blocks : pool.free) {
    for (auto it = blocks.begin(); it != blocks.end();) {
      Block* b = *it++;
      if (!b->is_split() && !b->expandable) release_segment(d, blocks, b);
    }
  }
  for (int small : {0, 1}) {
    if (!pool.expandable[small].empty()) unmap_free(d, pool, small);
  }
}

// every cached segment that is whole (not split) goes back to the device: the default pool's, and
// those of private pools no graph uses any more (a pool left without segments is gone)
void release_cached(Device& d) {
  release_whole(d, d.pool);
  for (auto it = d.private_pools.begin(); it != d.private_pools.end();) {
    Pool& p = *it->second;
    if (p.use_count == 0) release_whole(d, p);
    const bool gone = p.use_count == 0 && p.segments == 0 && p.expandable[0].empty() && p.expandable[1].empty();
    it = gone ? d.private_pools.erase(it) : std::next(it);
  }
}

// src, a neighbour of dst, becomes part of dst; returns the bytes it brought
int64_t absorb(Block* dst, Block* src) {
  if (dst->prev == src) {
    dst->addr = src->addr;
    dst->prev = src->prev;
    if (dst->prev) dst->prev->next = dst;
  } else {
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  const int64_t subsumed = src->size;
  dst->size += subsumed;
  delete src;
  return subsumed;
}

int64_t merge(Block* dst, Block* src, FreeBlocks& pool) {
  if (src == nullptr || src->allocated || !src->mapped || !dst->mapped) return 0;
  pool.erase(src);
  return absorb(dst, src);
}

// two neighbouring blocks of an expandable segment, both unmapped: one
void merge_unmapped(Pool& p, int small, Block* dst, Block* src) {
  if (src == nullptr || src->mapped || src->allocated || dst->mapped) return;
  p.unmapped[small].erase(src);
  absorb(dst, src);
}

int64_t page_of(bool small) { return small ? kSmallBuffer : kLargeBuffer; }

// map the first `size` bytes (whole pages) of unmapped block u; its mapped part merges with free
// mapped neighbours; returns that free block, or nullptr when the device has no room
Block* map_front(Device& d, Pool& p, bool small, Block* u, int64_t size, int64_t limit) {
  const int64_t page = page_of(small);
  const int64_t n = std::min(u->size, page * ((size + page - 1) / page));
  if (d.total_reserved + n > limit) return nullptr;
  p.unmapped[small].erase(u);
  if (n < u->size) {  // the rest stays unmapped
    Block* rest = new Block{u->addr + n, u->size - n, 0, small, false, &p};
    rest->stream = u->stream;
    rest->mapped = false;
    rest->expandable = true;
    rest->prev = u;
    rest->next = u->next;
    if (rest->next) rest->next->prev = rest;
    u->next = rest;
    u->size = n;
    p.unmapped[small].insert(rest);
  }
  u->mapped = true;
  d.total_reserved += n;
  d.num_device_alloc += 1;
  change(d, kReservedBytes, small, n);
  auto& blocks = p.free[small ? 1 : 0];
  for (Block* candidate : {u->prev, u->next}) merge(u, candidate, blocks);
  blocks.insert(u);
  return u;
}

// an expandable segment's free mapped block of at least `size` bytes, mapping pages as needed
Block* expandable_block(Device& d, Pool& p, bool small, int64_t stream, int64_t size, int64_t limit) {
  auto& blocks = p.free[small ? 1 : 0];
  if (p.expandable[small].insert(stream).second) {  // the stream's first: its segment of address space
    const int64_t page = page_of(small);
    d.next_addr = page * ((d.next_addr + page - 1) / page);
    Block* all = new Block{d.next_addr, kExpandableSpace, 0, small, false, &p};
    all->stream = stream;
    all->mapped = false;
    all->expandable = true;
    d.next_addr += kExpandableSpace;
    p.unmapped[small].insert(all);
  }
  auto room = [&](Block* b) {  // allocatable bytes from b on: free mapped or unmapped neighbours
    int64_t bytes = 0;
    for (; b != nullptr && !b->allocated && bytes < size; b = b->next) bytes += b->size;
    return bytes >= size;
  };
  for (Block* u : p.unmapped[small]) {
    if (u->stream != stream) continue;
    Block* c = u->prev != nullptr && !u->prev->allocated && u->prev->mapped ? u->prev : u;
    if (!room(c)) continue;
    if (!c->mapped) {
      c = map_front(d, p, small, c, size, limit);
      if (c == nullptr) return nullptr;
    }
    while (c->size < size) {  // c is free and mapped: the unmapped block after it grows it (merged into one)
      c = map_front(d, p, small, c->next, size - c->size, limit);
      if (c == nullptr) return nullptr;
    }
    blocks.erase(c);
    return c;
  }
  return nullptr;
}

// empty_cache() on an expandable segment: the whole pages inside each free mapped block are unmapped
void unmap_free(Device& d, Pool& p, int small) {
  auto& blocks = p.free[small ? 1 : 0];
  std::vector<Block*> free_blocks;
  for (Block* b : blocks) {
    if (b->expandable) free_blocks.push_back(b);
  }
  const int64_t page = page_of(small);
  for (Block* b : free_blocks) {
    const int64_t begin = page * ((b->addr + page - 1) / page), end = page * ((b->addr + b->size) / page);
    if (end <= begin) continue;
    blocks.erase(b);
    Block* mid = b;
    if (begin > b->addr) {  // a mapped head stays free
      Block* head = new Block{b->addr, begin - b->addr, 0, small != 0, false, &p};
      head->stream = b->stream;
      head->expandable = true;
      head->prev = b->prev;
      if (head->prev) head->prev->next = head;
      head->next = b;
      b->prev = head;
      b->addr = begin;
      b->size -= head->size;
      blocks.insert(head);
    }
    if (end < mid->addr + mid->size) {  // and a mapped tail
      Block* tail = new Block{end, mid->addr + mid->size - end, 0, small != 0, false, &p};
      tail->stream = mid->stream;
      tail->expandable = true;
      tail->next = mid->next;
      if (tail->next) tail->next->prev = tail;
      tail->prev = mid;
      mid->next = tail;
      mid->size = end - mid->addr;
      blocks.insert(tail);
    }
    mid->mapped = false;
    d.total_reserved -= mid->size;
    d.num_device_free += 1;
    change(d, kReservedBytes, small != 0, -mid->size);
    Block* next = mid->next;
    merge_unmapped(p, small, mid, mid->prev);
    merge_unmapped(p, small, mid, next);
    p.unmapped[small].insert(mid);
  }
}

}  // namespace

bool model_active() { return g_active; }
void set_model_active(bool on) { g_active = on; }
void set_model_expandable(bool on) { g_expandable = on; }

void* model_malloc(c10::DeviceIndex index, size_t n, int64_t capacity, int64_t allowed) {
  // the private pool the real allocation goes to (pools.cpp: a capture's, or a thread's begun on one);
  // asked before the lock: pools.cpp calls in while holding its own
  std::optional<std::pair<uint64_t, uint64_t>> capture;
  if (const auto id = mempool_here(index)) capture = std::make_pair(id->first, id->second);
  const int64_t stream = current_stream_id(index);
  Device& d = g_devices[index];
  std::lock_guard<std::mutex> lock(d.mutex);
  const int64_t size = round_size(static_cast<int64_t>(n));
  const bool small = size <= kSmallSize;
  Pool* owner = &d.pool;
  if (capture.has_value()) {
    auto& p = d.private_pools[*capture];
    if (!p) {
      p = std::make_unique<Pool>();
      p->id = *capture;
    }
    owner = p.get();
  }
  auto& pool = owner->free[small ? 1 : 0];
  Block probe{0, size, 0, small};
  probe.stream = stream;
  Block* block = nullptr;
  auto it = pool.lower_bound(&probe);  // the stream's smallest block that fits, lowest address first
  if (it != pool.end() && (*it)->stream != stream) it = pool.end();
  if (it != pool.end() && g_expandable && (*it)->expandable) {
    // get_free_block: an expandable segment's block counts as large as it can grow (the unmapped range
    // after it included), so the blocks that end at unmapped space go last among those that fit
    auto expandable_size = [](const Block* b) {
      return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0);
    };
    for (auto next = std::next(it); (*it)->expandable && next != pool.end() && (*next)->stream == stream &&
                                    expandable_size(*next) < expandable_size(*it);) {
      it = next++;
    }
  }
  if (it != pool.end()) {
    block = *it;
    pool.erase(it);
  } else if (g_expandable) {
    const int64_t limit = std::min(capacity, allowed);
    block = expandable_block(d, *owner, small, stream, size, limit);
    if (block == nullptr && !capture.has_value()) {
      release_cached(d);
      d.num_alloc_retries += 1;
      block = expandable_block(d, *owner, small, stream, size, limit);
    }
    if (block == nullptr) {
      d.num_ooms += 1;
      return nullptr;
    }
  } else {
    const int64_t alloc_size = allocation_size(size);
    auto fits = [&] { return d.total_reserved + alloc_size <= std::min(capacity, allowed); };
    bool ok = fits();
    if (!ok && !capture.has_value()) {  // nothing is given back while a capture allocates (CUDA's rule)
      release_cached(d);
      d.num_alloc_retries += 1;
      ok = fits();
    }
    if (!ok) {
      d.num_ooms += 1;
      return nullptr;  // the caller raises, with the statistics as they stand
    }
    block = new Block{d.next_addr, alloc_size, 0, small, false, owner};
    block->stream = stream;
    owner->segments += 1;
    d.next_addr += alloc_size;
    d.total_reserved += alloc_size;
    d.num_device_alloc += 1;
    change(d, kSegment, small, 1);
    change(d, kReservedBytes, small, alloc_size);
  }
  const int64_t remaining = block->size - size;
  const bool split = small || g_expandable ? remaining >= kMinBlockSize : remaining > kSmallSize;
  const bool already_split = block->is_split();
  const bool counts_split = !block->expandable;  // expandable segments' blocks are not "inactive split"
  if (split) {
    Block* rest = block;
    block = new Block{rest->addr, size, 0, small, false, owner};
    block->stream = rest->stream;
    block->expandable = rest->expandable;
    block->prev = rest->prev;
    if (block->prev) block->prev->next = block;
    block->next = rest;
    rest->prev = block;
    rest->addr += size;
    rest->size -= size;
    pool.insert(rest);
    if (already_split && counts_split) {
      change(d, kInactiveSplitBytes, small, -size);  // an inactive split block shrinks by `size`
    } else if (counts_split) {
      change(d, kInactiveSplitBytes, small, rest->size);
      change(d, kInactiveSplit, small, 1);
    }
  } else if (already_split && counts_split) {
    change(d, kInactiveSplitBytes, small, -block->size);
    change(d, kInactiveSplit, small, -1);
  }
  block->allocated = true;
  block->requested = static_cast<int64_t>(n);
  d.active.insert(block);
  change(d, kAllocation, small, 1);
  change(d, kAllocatedBytes, small, block->size);
  change(d, kActive, small, 1);
  change(d, kActiveBytes, small, block->size);
  change(d, kRequestedBytes, small, block->requested);
  return block;
}

void model_free(c10::DeviceIndex index, void* handle) {
  Device& d = g_devices[index];
  std::lock_guard<std::mutex> lock(d.mutex);
  auto* block = static_cast<Block*>(handle);
  block->allocated = false;
  const int64_t size = block->size, requested = block->requested;
  const bool small = block->small;
  change(d, kAllocation, small, -1);
  change(d, kAllocatedBytes, small, -size);
  auto& pool = block->pool->free[small ? 1 : 0];
  int64_t split_blocks = 0, split_bytes = 0;
  for (Block* candidate : {block->prev, block->next}) {
    const int64_t subsumed = merge(block, candidate, pool);
    if (subsumed > 0) {
      split_blocks -= 1;
      split_bytes -= subsumed;
    }
  }
  d.active.erase(block);
  pool.insert(block);
  if (block->is_split()) {
    split_blocks += 1;
    split_bytes += block->size;
  }
  if (!block->expandable) {
    change(d, kInactiveSplit, small, split_blocks);
    change(d, kInactiveSplitBytes, small, split_bytes);
  }
  change(d, kActive, small, -1);
  change(d, kActiveBytes, small, -size);
  change(d, kRequestedBytes, small, -requested);
}

void model_pool_begin(c10::DeviceIndex index, std::pair<uint64_t, uint64_t> id) {
  Device& d = g_devices[index];
  std::lock_guard<std::mutex> lock(d.mutex);
  auto& p = d.private_pools[id];
  if (!p) {
    p = std::make_unique<Pool>();
    p->id = id;
  } else {
    p->use_count += 1;
  }
}

void model_pool_release(c10::DeviceIndex index, std::pair<uint64_t, uint64_t> id) {
  Device& d = g_devices[index];
  std::lock_guard<std::mutex> lock(d.mutex);
  auto it = d.private_pools.find(id);
  if (it != d.private_pools.end() && it->second->use_count > 0) it->second->use_count -= 1;
}

int64_t model_size(const void* handle) { return static_cast<const Block*>(handle)->size; }
int64_t model_allocation_size(size_t n) { return allocation_size(round_size(static_cast<int64_t>(n))); }

void model_empty_cache() {
  for (auto& d : g_devices) {
    std::lock_guard<std::mutex> lock(d.mutex);
    release_cached(d);
  }
}

void model_empty_pool_cache(c10::DeviceIndex index, std::pair<uint64_t, uint64_t> id) {
  Device& d = g_devices[index];
  std::lock_guard<std::mutex> lock(d.mutex);
  auto it = d.private_pools.find(id);
  if (it == d.private_pools.end() || it->second->use_count > 0) return;
  Pool& p = *it->second;
  release_whole(d, p);
  if (p.segments == 0 && p.expandable[0].empty() && p.expandable[1].empty()) d.private_pools.erase(it);
}

ModelStats model_stats(c10::DeviceIndex index) {
  Device& d = g_devices[index];
  std::lock_guard<std::mutex> lock(d.mutex);
  ModelStats s;
  s.stat = d.stat;
  s.num_alloc_retries = d.num_alloc_retries;
  s.num_ooms = d.num_ooms;
  s.num_device_alloc = d.num_device_alloc;
  s.num_device_free = d.num_device_free;
  return s;
}

void model_reset_peak(c10::DeviceIndex index) {
  Device& d = g_devices[index];
  std::lock_guard<std::mutex> lock(d.mutex);
  for (auto& s : d.stat) s.peak = s.current;
}

void model_reset_accumulated(c10::DeviceIndex index) {
  Device& d = g_devices[index];
  std::lock_guard<std::mutex> lock(d.mutex);
  for (auto& s : d.stat) s.allocated = s.freed = 0;
  d.num_alloc_retries = d.num_ooms = d.num_device_alloc = d.num_device_free = 0;
}

std::vector<ModelSegment> model_segments(c10::DeviceIndex index) {
  Device& d = g_devices[index];
  std::lock_guard<std::mutex> lock(d.mutex);
  std::vector<const Block*> heads;
  for (const Block* b : d.active) {
    if (b->prev == nullptr) heads.push_back(b);
  }
  auto add = [&](const Pool& pool) {
    for (const auto& blocks : pool.free) {
      for (const Block* b : blocks) {
        if (b->prev == nullptr) heads.push_back(b);
      }
    }
    for (const auto& ranges : pool.unmapped) {  // an expandable segment whose first pages are unmapped
      for (const Block* b : ranges) {
        if (b->prev == nullptr) heads.push_back(b);
      }
    }
  };
  add(d.pool);
  for (const auto& [id, p] : d.private_pools) add(*p);
  std::sort(heads.begin(), heads.end(), [](const Block* a, const Block* b) { return a->addr < b->addr; });
  std::vector<ModelSegment> out;
  for (const Block* h : heads) {
    // an expandable segment is listed as one segment per run of mapped blocks, as CUDA's snapshot does
    for (const Block* b = h; b != nullptr;) {
      if (!b->mapped) {
        b = b->next;
        continue;
      }
      ModelSegment seg;
      seg.address = b->addr;
      seg.small = b->small;
      seg.expandable = b->expandable;
      seg.pool_id = b->pool->id;
      for (; b != nullptr && b->mapped; b = b->next) {
        seg.blocks.push_back({b->addr, b->size, b->requested, b->allocated});
        seg.total_size += b->size;
        if (b->allocated) {
          seg.allocated_size += b->size;
          seg.requested_size += b->requested;
        }
      }
      out.push_back(std::move(seg));
    }
  }
  return out;
}

}  // namespace cudashim
