// Private memory pools of the emulated device, as CUDA's caching allocator keeps them for CUDA graphs.
//
// A pool is named by a MempoolId (graph_pool_handle(), or the id a graph makes for itself). Memory is
// allocated to it while a capture that uses it records the calling thread's stream, and while a
// thread has begun allocating to it (torch._C._cuda_beginAllocateCurrentThreadToPool: Inductor's CUDA
// graph trees warm up inside their pool). A pool lives while it has users: each graph that captured
// into it, each begun thread until releasePool, as CUDA counts them.
//
// What the pool is for: a graph replays into the memory of its capture after the program has let go
// of the tensors over it, so a freed block of a live pool is kept, never handed to another
// allocation (CUDA hands it to later allocations in the same pool only). It leaves
// memory_allocated() and stays in memory_reserved(), as on CUDA, and goes back when the pool's last
// user does. Unlike CUDA, a pool never reuses its own freed blocks: more memory, never a block two
// graphs write at once.
//
// For the graph trees: a pool's state (its allocated blocks) can be read and set back
// (getCheckpointState / setCheckpointPoolState), a storage can give up its block to the pool
// (_free_And_Remove_DeleterFn) or take one back (the storages setCheckpointPoolState adds deleters
// to), and a tensor or storage can be invalidated with a message (outputs of an earlier replay).
#include "shim.h"

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace cudashim {
namespace {

struct Entry {
  void* ctx;       // what the allocator's deleter takes (pool_block_owner)
  bool adopted;
  bool owned;      // a DataPtr with the device's deleter holds it
  bool counted;    // allocated in the pool's state (counted in memory_allocated())
};

struct MemPool {
  c10::DeviceIndex device;
  c10::MempoolId_t id;
  int64_t users = 0;
  std::unordered_map<void*, Entry> blocks;  // by data pointer
};

std::mutex g_mutex;
std::map<int64_t, MemPool> g_pools;  // by tag: tags are never reused, so a block outliving its pool finds none
std::map<std::pair<c10::DeviceIndex, c10::MempoolId_t>, int64_t> g_tags;
int64_t g_next_tag = 1;
std::atomic<int> g_begun{0};  // threads allocating to a pool now: allocations ask only while any does

struct Begun {
  c10::DeviceIndex device;
  int64_t tag;
};
thread_local std::vector<Begun> t_begun;

// under g_mutex
MemPool* find(c10::DeviceIndex device, c10::MempoolId_t id) {
  auto it = g_tags.find({device, id});
  return it == g_tags.end() ? nullptr : &g_pools.at(it->second);
}

int64_t retain_locked(c10::DeviceIndex device, c10::MempoolId_t id) {
  auto it = g_tags.find({device, id});
  if (it == g_tags.end()) {
    const int64_t tag = g_next_tag++;
    it = g_tags.emplace(std::make_pair(device, id), tag).first;
    g_pools[tag] = MemPool{device, id};
  }
  g_pools.at(it->second).users += 1;
  if (model_active()) model_pool_begin(device, {id.first, id.second});  // the model's pool has the same users
  return it->second;
}

// the pool block over data pointer p (a data pointer names one block of one device)
std::pair<MemPool*, Entry*> entry_of(void* p) {
  for (auto& [tag, pool] : g_pools) {
    auto it = pool.blocks.find(p);
    if (it != pool.blocks.end()) return {&pool, &it->second};
  }
  return {nullptr, nullptr};
}

void set_counted(Entry& e, bool on) {
  if (e.counted == on) return;
  pool_block_count(e.ctx, e.adopted, on);
  e.counted = on;
}

}  // namespace

std::optional<c10::MempoolId_t> mempool_here(c10::DeviceIndex device) {
  if (C10_LIKELY(g_begun.load(std::memory_order_relaxed) == 0 && !capture_open())) return std::nullopt;
  if (graph_replaying()) return std::nullopt;  // a replay's transient buffers are no pool's
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (auto it = t_begun.rbegin(); it != t_begun.rend(); ++it) {
      if (it->device != device) continue;
      auto pool = g_pools.find(it->tag);
      if (pool != g_pools.end()) return pool->second.id;
    }
  }
  return capture_pool_here(device);
}

int64_t mempool_take(c10::DeviceIndex device, void* data, void* ctx, bool adopted) {
  if (C10_LIKELY(g_begun.load(std::memory_order_relaxed) == 0 && !capture_open())) return 0;
  const std::optional<c10::MempoolId_t> id = mempool_here(device);
  if (!id.has_value()) return 0;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_tags.find({device, *id});
  if (it == g_tags.end()) return 0;
  const int64_t tag = it->second;
  auto pool = g_pools.find(tag);
  if (pool == g_pools.end()) return 0;
  pool->second.blocks[data] = Entry{ctx, adopted, true, true};
  return tag;
}

bool mempool_owner_gone(int64_t tag, void* data) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto pool = g_pools.find(tag);
  if (pool == g_pools.end()) return false;  // the pool went first: the block is freed as any other
  auto it = pool->second.blocks.find(data);
  if (it == pool->second.blocks.end()) return false;
  it->second.owned = false;
  set_counted(it->second, false);
  return true;
}

void mempool_retain(c10::DeviceIndex device, c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  retain_locked(device, id);
}

void mempool_release(c10::DeviceIndex device, c10::MempoolId_t id) {
  std::vector<Entry> leaving;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_tags.find({device, id});
    if (it == g_tags.end()) return;
    MemPool& pool = g_pools.at(it->second);
    if (model_active()) model_pool_release(device, {id.first, id.second});
    if (--pool.users > 0) return;
    for (auto& [p, e] : pool.blocks) {
      if (!e.owned) {
        set_counted(e, false);
        leaving.push_back(e);
      }
    }
    g_pools.erase(it->second);  // blocks still owned are freed by their owners, as any other
    g_tags.erase(it);
  }
  for (const Entry& e : leaving) pool_block_return(e.ctx, e.adopted);
}

void mempool_begin_thread(c10::DeviceIndex device, c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const Begun& b : t_begun) {
    const MemPool& pool = g_pools.at(b.tag);
    TORCH_CHECK(!(pool.device == device && pool.id == id), "beginAllocateToPool: already recording to mempool_id");
  }
  t_begun.push_back({device, retain_locked(device, id)});
  g_begun.fetch_add(1);
}

void mempool_end_thread(c10::DeviceIndex device, c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto it = t_begun.begin(); it != t_begun.end(); ++it) {
    auto pool = g_pools.find(it->tag);
    if (pool != g_pools.end() && pool->second.device == device && pool->second.id == id) {
      t_begun.erase(it);
      g_begun.fetch_sub(1);
      return;
    }
  }
}

std::vector<int64_t> mempool_allocated(c10::DeviceIndex device, c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<int64_t> out;
  if (MemPool* pool = find(device, id)) {
    for (const auto& [p, e] : pool->blocks) {
      if (e.counted) out.push_back(reinterpret_cast<int64_t>(p));
    }
  }
  return out;
}

void mempool_set_state(c10::DeviceIndex device, c10::MempoolId_t id, const std::vector<int64_t>& allocated,
                       const std::vector<c10::StorageImpl*>& take_back) {
  std::lock_guard<std::mutex> lock(g_mutex);
  MemPool* pool = find(device, id);
  TORCH_CHECK(pool != nullptr, "setCheckpointPoolState: no private pool (", id.first, ", ", id.second, ") on device ",
              static_cast<int>(device));
  std::unordered_set<void*> keep;
  for (int64_t p : allocated) keep.insert(reinterpret_cast<void*>(p));
  for (auto& [p, e] : pool->blocks) {
    // a block a tensor still owns stays allocated: the pool never hands it out again either way
    if (keep.count(p) != 0 || e.owned) {
      set_counted(e, true);
    } else {
      set_counted(e, false);
    }
  }
  for (c10::StorageImpl* s : take_back) {
    void* p = s->mutable_data_ptr().get();
    auto it = pool->blocks.find(p);
    TORCH_CHECK(it != pool->blocks.end() && keep.count(p) != 0, "Expected storage to be in allocated set");
    if (it->second.owned) continue;  // its owner frees it
    s->set_data_ptr_noswap(pool_block_owner(it->second.ctx, it->second.adopted, device));
    it->second.owned = true;
  }
}

bool mempool_raw_delete(void* p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto [pool, e] = entry_of(p);
  if (e == nullptr) return false;
  set_counted(*e, false);
  return true;
}

void free_and_remove_deleter(c10::StorageImpl* s) {
  c10::DataPtr& dp = s->mutable_data_ptr();
  const c10::DeleterFnPtr d = dp.get_deleter();
  TORCH_CHECK(is_device_deleter(d), "Expected standard deleter");
  void* ctx = dp.get_context();
  void* p = dp.get();
  TORCH_CHECK(dp.compare_exchange_deleter(d, &c10::detail::deleteNothing), "Expected standard deleter");
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto [pool, e] = entry_of(p);
    if (e != nullptr) {
      e->owned = false;
      set_counted(*e, false);
      return;
    }
  }
  d(ctx);  // not a pool's block: nothing replays into it, it is freed
}

bool mempool_holds(c10::DeviceIndex device, c10::MempoolId_t id, const void* p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  MemPool* pool = find(device, id);
  return pool != nullptr && pool->blocks.count(const_cast<void*>(p)) != 0;
}

bool has_standard_deleter(const c10::StorageImpl* s) { return is_device_deleter(s->data_ptr().get_deleter()); }

}  // namespace cudashim
