// The emulated device's shared declarations: one host-memory device type, chosen at run time.
//
// One build serves both devices: init() (module.cpp), called from Python once, before anything is
// registered, sets the dispatch key and device type (CUDA for the cpu platform; PrivateUse1 for the
// simulated Ascend device) and makes every registration for them. Everything else in csrc/ is written
// against kKey / kType only. A process that needs both devices loads a second copy of the library
// file (each loaded file has its own globals, so its own key).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceType.h>
#include <c10/core/DispatchKey.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

namespace cudashim {

// set once by init(), before any registration reads them; never changed after
extern c10::DeviceType kType;
extern c10::DispatchKey kKey;
inline bool is_cuda() { return kType == c10::DeviceType::CUDA; }  // the cpu platform's device, not the NPU
// the most devices: per-device tables (statistics, pools, current streams) are this long, and
// set_device_count refuses more (cudashim/envs.py's CPU_DEVICES_MAX is the same bound)
constexpr int kMaxDevices = 64;

// devices.cpp: how many devices, which one this thread uses, CUDA's range error
c10::DeviceIndex device_count();
void set_device_count(int64_t n);  // raises outside 0..kMaxDevices
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
// The bytes of the devices' large blocks the host has not yet given pages for: memory the host still
// counts as available though a device holds it (mem_get_info() takes it off).
int64_t untouched_bytes();
// A CPU kernel a device ran could not get its output from the host: when e is the CPU allocator's
// refusal, CUDA's out of memory for that request on `index` (counted in num_ooms); else it returns.
void host_refused(c10::DeviceIndex index, const c10::Error& e);
// Out-of-memory bounds of a device: its capacity (a profile's memory, else the host's) and the share
// set_per_process_memory_fraction allows (1.0: all of it); a request past them raises CUDA's
// OutOfMemoryError ("NPU out of memory" on the simulated NPU), counted in num_ooms.
void set_memory_capacity(c10::DeviceIndex index, int64_t bytes);
int64_t memory_capacity(c10::DeviceIndex index);
void set_memory_fraction(c10::DeviceIndex index, double fraction);
double memory_fraction(c10::DeviceIndex index);
int64_t num_ooms(c10::DeviceIndex index);
// torch_npu's throw_on_npumalloc_oom: while `fraction` >= 0, a new block that would take what a device
// holds past that share of its capacity is refused with torch_npu's OutOfMemoryError before the host is
// asked, and counted in the device's oom rejections (below 0: off)
void set_oom_rejection(double fraction);
int64_t oom_rejections(c10::DeviceIndex index);
void reset_oom_rejections(c10::DeviceIndex index);
// Device blocks as address space reserved on demand (mmap MAP_NORESERVE): pages are committed
// when touched, so a profile larger than the host can be allocated as long as it is not all touched.
void set_reserve_on_demand(bool on);
// The preflight (cudashim/emulated/preflight.py): while set, called after each allocation that raises
// a device's allocated or reserved peak or its largest request, and before an out-of-memory error.
enum MemoryEvent { kAllocatedPeak = 0, kLargest = 1, kOutOfMemory = 2, kReservedPeak = 3 };
using MemoryObserver = void (*)(c10::DeviceIndex device, int event, int64_t bytes);
void set_memory_observer(MemoryObserver fn);  // nullptr: none
// What c10::DeviceAllocator::getMemoryInfo (torch.accelerator.get_memory_info) answers: the device
// module's mem_get_info(), set from Python (module.cpp), so both answer alike.
// torch_npu's own switch of the deterministic fill of new tensors (kernels.cpp)
void set_npu_fill_uninitialized_memory(bool on);
bool npu_fill_uninitialized_memory();
using MemoryInfoSource = std::pair<size_t, size_t> (*)(c10::DeviceIndex device);
void set_memory_info_source(MemoryInfoSource fn);

// host_memory_stats(): pinned memory as CUDA's caching host allocator counts it
struct PinnedStats {
  struct Stat {
    int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  };
  // c10's DurationStat: microseconds the host took to give or take back a block
  struct Duration {
    int64_t total = 0, max = 0, min = 0, count = 0;
  };
  Stat allocations, allocated_bytes, active_requests, active_bytes;
  int64_t num_host_alloc = 0, num_host_free = 0;
  Duration host_alloc_time, host_free_time;
};
PinnedStats pinned_stats();
void empty_host_cache();
// the caching host allocator's pinned_max_round_threshold and pinned_max_cached_size, in bytes: a request
// above either is not rounded to a power of two, and a block above the second goes back to the host when freed
void set_host_thresholds(int64_t round_threshold, int64_t max_cached);

// cache_model.cpp: CUDA's caching allocator, modelled for the statistics while a profile is active
struct ModelStats {
  struct Stat {
    int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  };
  // allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
  // inactive_split_bytes, requested_bytes; each as (all, small_pool, large_pool)
  std::array<Stat, 9 * 3> stat{};
  int64_t num_alloc_retries = 0, num_ooms = 0, num_device_alloc = 0, num_device_free = 0;
};
struct ModelSegment {
  struct Block {
    int64_t address, size, requested;
    bool allocated;
  };
  int64_t address = 0, total_size = 0, allocated_size = 0, requested_size = 0;
  bool small = false, expandable = false;
  std::pair<uint64_t, uint64_t> pool_id{0, 0};  // the private pool's id; (0, 0): the default pool
  std::vector<Block> blocks;
};
bool model_active();
void set_model_active(bool on);
void set_model_expandable(bool on);  // PYTORCH_CUDA_ALLOC_CONF's expandable_segments
// a block for a request of n bytes, or nullptr when neither the cache nor min(capacity, allowed) has room
void* model_malloc(c10::DeviceIndex index, size_t n, int64_t capacity, int64_t allowed);
void model_free(c10::DeviceIndex index, void* block);
int64_t model_size(const void* block);
int64_t model_allocation_size(size_t n);  // the segment a request of n bytes would ask the device for
void model_empty_cache();
// emptyCache(mempool_id): the whole free segments of that private pool, once no one uses it, go back
void model_empty_pool_cache(c10::DeviceIndex index, std::pair<uint64_t, uint64_t> id);
ModelStats model_stats(c10::DeviceIndex index);
void model_reset_peak(c10::DeviceIndex index);
void model_reset_accumulated(c10::DeviceIndex index);
std::vector<ModelSegment> model_segments(c10::DeviceIndex index);
// CUDA graphs' private pools (beginAllocateToPool / releasePool), begun and released by pools.cpp with
// its own pools: a request is served from the pool mempool_here() names; the pool's whole free
// segments go back once it has no user
void model_pool_begin(c10::DeviceIndex index, std::pair<uint64_t, uint64_t> id);
void model_pool_release(c10::DeviceIndex index, std::pair<uint64_t, uint64_t> id);
// allocator.cpp: cuBLAS's workspaces, as PyTorch takes them from the caching allocator on a GPU: the
// first BLAS call of a thread's cuBLAS handle on a stream allocates `cublas` bytes, kept for the
// process; one through cuBLASLt also `cublaslt` bytes (0: Lt shares cuBLAS's). Only under the model.
void set_blas_workspace(int64_t cublas, int64_t cublaslt);
void blas_call(bool lt);
void clear_blas_workspaces();  // torch._C._cuda_clearCublasWorkspaces: they go back to the allocator
// blas.cpp: for a call on the stack (its arguments), -1: no cuBLAS on a GPU; 0: cuBLAS; 1: cuBLASLt too
int blas_kind(const c10::OperatorHandle& op, const std::vector<c10::IValue>& stack);

// views.cpp: the same memory seen from the other side
at::Tensor cpu_view(const at::Tensor& t, bool keep_alive = true);
// a CPU view of device tensor t over `storage`: another CPU view's, of the same device memory
at::Tensor cpu_view_over(const at::Tensor& t, const c10::Storage& storage);
// A CPU kernel's output as a device tensor of `index`: its memory adopted where nothing else holds it,
// its own TensorImpl turned into the device tensor where nothing else holds that (pass it moved);
// `base`: the device storage of the argument the output is a view of.
at::Tensor as_device(at::Tensor cpu, c10::DeviceIndex index, const c10::Storage* base = nullptr);
// A CPU kernel's argument: a device tensor as a CPU view of its memory (not kept alive: the caller
// holds the tensor for the call); any other tensor, or an undefined one, as it is.
inline at::Tensor host(const at::Tensor& t) {
  return t.defined() && t.device().type() == kType ? cpu_view(t, false) : t;
}

// views.cpp, for tensors across processes: a device storage moved into a (shared) CPU storage, the CPU
// storage holding a device storage's memory (undefined if none), a device byte tensor over a CPU storage
void rehome(const at::Tensor& device_tensor, const at::Tensor& host);
at::Tensor host_owner(const at::Tensor& device_tensor);
at::Tensor device_over(const at::Tensor& host, c10::DeviceIndex index);

// kernels.cpp: a strided buffer of device `index` (empty_strided's kernel; Inductor's wrapper allocations,
// which skip the dispatcher)
at::Tensor empty_on(c10::DeviceIndex index, c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype);

// init()'s registrations for kKey / kType (what static registration does in a library built for one
// key), each made once: hooks.cpp, guard.cpp, sdpa.cpp, and the operator files' kernels
void register_hooks();
// torch_cuda.cpp: on a CUDA build of torch, its CUDA backend's kernels replaced by what a CPU build's
// table holds (composite, else the fallback), before the device's own go on top; the count replaced
int64_t replace_torch_cuda_kernels();
int64_t torch_cuda_kernels_replaced();
// op has a kernel for key that is not one of torch's CUDA kernels' stand-ins (the device's own, or one
// a CPU build has too): what "the device implements this operator itself" means on both builds
bool device_has_kernel(const c10::OperatorHandle& op, c10::DispatchKey key);
void register_guard();
void register_sdpa();
void register_fallback();  // fallback.cpp: the boxed fallback and the composites that choose a backend
void register_kernels();   // kernels.cpp
void register_direct();    // direct.cpp
void register_amp();       // amp.cpp (and the NPU's autocast policy)
void register_rnn();
void register_linalg();
void register_npu_sparse();  // npu_coverage.cpp: the simulated NPU's sparse fallback, and its round with decimals
void register_sparse();      // sparse.cpp: the cuda device's sparse keys
void register_cuda_only();   // cuda_only.cpp: operators only CUDA has
void register_graph();       // graph.cpp: torch.accelerator.Graph's implementation
void register_timer();       // ddp_timer.cpp: DDP's timer for the device
// fallback.cpp: the operators CUDA synchronizes on, (aten::name[.overload], always | none:ARG | bool:ARG)
void register_synchronizing(const std::vector<std::pair<std::string, std::string>>& table);
void register_cpu_kernels_direct();  // fallback.cpp: operators with a CPU kernel take it, not their composite
void register_host_composites();     // fallback.cpp: a few hot composite operators run whole on the CPU
void register_collectives();  // collectives.cpp: once torch.distributed is loaded

// npu_coverage.cpp: torch_npu's operator table on the simulated NPU (inactive until set_npu_native)
bool npu_coverage_active();
// torch_npu's dtype checks of the operator's kernel, then, outside the table, warns, counts or refuses as
// npu_cpu_fallback does; `stack` holds the call's arguments on top
void npu_cpu_fallback_check(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
void npu_kernel_check(const c10::OperatorHandle& op, const torch::jit::Stack& stack);  // the dtype checks alone
// What a kernel of the core's own (not the fallback) does first on the simulated NPU, as torch_npu's dispatch
// would: Plain / Checked (torch_npu has a kernel: none, or its dtype checks, before this one), Composite (no
// NPU kernel but a composite one: that runs, and its parts decide), Fallback (neither: torch_npu's CPU
// fallback, which warns, counts, refuses or fails as npu_cpu_fallback_check says)
enum class NpuKernel { Plain, Checked, Composite, Fallback };
NpuKernel npu_core_kernel(const c10::OperatorHandle& op);
// runs the operator's composite kernel when torch_npu would (NpuKernel::Composite); false otherwise
bool npu_run_composite(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// one dtype check of a torch_npu kernel (torch_npu_dtype_checks.json as coverage.py hands it over)
struct NpuDtypeCheck {
  std::string op;  // "name.overload", no aten::
  std::vector<std::pair<size_t, std::vector<c10::ScalarType>>> when;  // every argument's dtype among these
  std::string before, after;  // torch_npu's message around the shown argument's dtype
  int64_t shown = -1;         // that argument's index, or -1
  bool meta = false;          // shown as a TypeMeta ("double") rather than a ScalarType ("Double")
  std::string code;           // what OPS_ERROR / PTA_ERROR appends, "ERR01002 OPS invalid type"
};
// set once, before any operator runs; `whole`: composite operators that then run whole on the CPU
void set_npu_dtype_checks(const std::vector<NpuDtypeCheck>& checks, const std::vector<std::string>& whole);
void set_npu_native(const std::vector<std::string>& names, const std::vector<std::string>& sparse);
bool npu_native(const std::string& name);  // "name.overload" (no aten::) has an NPU kernel in the table
std::unordered_map<std::string, int64_t> npu_fallback_counts();

// exit.cpp: at interpreter exit (atexit), the autograd device threads have let go of every backward
void quiesce_autograd();

// generator.cpp: generators with CUDA's Philox state (seed, offset)
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);  // torch.Generator(device=...)
void set_philox_round_threads(int64_t threads);       // multiProcessorCount * maxThreadsPerMultiProcessor
// a random kernel's generator argument (None: the device's default) -> the CPU generator it draws
// from; advances the offset as CUDA's distribution kernels do for numel elements
c10::IValue kernel_generator(const c10::IValue& given, c10::DeviceIndex device, int64_t numel, size_t element_size);

// guard.cpp: the calling thread's current stream of a device (0: the default stream)
c10::StreamId current_stream_id(c10::DeviceIndex index);

// graph.cpp: CUDA graph capture. A capture belongs to a stream (and the streams that joined it by
// waiting on it): a call is recorded when the calling thread's current stream is one of them.
bool capturing();         // this call is recorded (its stream is capturing; no recorded call runs now)
bool capture_underway();  // the current stream is capturing (also while a recorded call runs)
bool capture_open();      // any capture is open, on any stream and thread
// CUDA's capture error (and the capture invalidated) for a call that may synchronize, where CUDA
// refuses one: on a capturing stream; on the capturing thread (not in "relaxed" mode); on any thread
// while a "global" capture is open. Else nothing.
void capture_refuse(const char* what);
// off: a refused call on a capturing stream raises without invalidating the capture (CANN's stream capture)
void set_stream_refusal_invalidates(bool on);
void capture_refuse_device(const char* what);  // the device synchronizes: refused while any capture is open
// the same for a stream's synchronize()/query() (the stream's own capture, else the mode's rule) and
// an event's, `capture` being the capture it was recorded in (capture_of_stream at record, 0: none)
void capture_refuse_stream(c10::DeviceIndex device, c10::StreamId stream, const char* what);
void capture_refuse_event(uint64_t capture, const char* what);
uint64_t capture_of_stream(c10::DeviceIndex device, c10::StreamId stream);  // the capture recording it, 0: none
bool graph_replaying();  // a graph replays on this thread (CUDA's replay allocates nothing)
// a stream waits on work of another (an event, wait_stream): a capture on `from` extends to `to`
void capture_join(c10::DeviceIndex device, c10::StreamId from, c10::StreamId to);
// a platform's words for capture refusals, "{what}" standing for the call (empty: CUDA's)
void set_capture_words(const std::string& refused, const std::string& invalidated);
// the default generator's graph state (two blocks while a graph uses it), by address
std::vector<int64_t> generator_graph_state(c10::DeviceIndex device);
// record the call on the stack (run it when CUDA would have to); true: the stack holds its returns
bool capture_boxed(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack);
// a device kernel of its own (not the fallback) under capture: record the call by name, return its result
at::Tensor capture_call(const char* name, std::vector<c10::IValue> args);
bool capture_copy(const at::Tensor& self, const at::Tensor& src, bool non_blocking);  // true: run it now too
at::Tensor capture_note(at::Tensor t);  // memory allocated while a capture is open is the graph's
void register_generator(const at::Generator& g);
// generator.cpp: random generators' state under graph capture, as CUDA's and torch_npu's keep it
// (NPUGeneratorState: capture_epilogue, replay_prologue). During a capture a random operator draws
// at an offset within the graph (its generator's intragraph offset for that capture), leaving the
// generator's own offset as it was; each replay draws at the generator's offset then plus that
// intragraph offset, and advances the generator by the whole graph's increment.
struct RngDraw {
  c10::intrusive_ptr<c10::intrusive_ptr_target> state;  // the generator's state (shared by graph-safe copies)
  uint64_t offset;                                       // within the graph
};
// the draws of a call recorded into `capture`, one per generator argument of its schema, in order;
// while the call runs during the capture its kernels draw numbers nobody reads
std::vector<RngDraw> capture_draws(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                   c10::DeviceIndex device, uint64_t capture);
// capture_end: each generator state that took part in `capture` with its whole-graph increment
std::vector<std::pair<c10::intrusive_ptr<c10::intrusive_ptr_target>, uint64_t>> capture_finish(uint64_t capture);
// replay_prologue of one state: its (seed, offset) now, its offset then advanced by `increment`
std::pair<uint64_t, uint64_t> replay_prologue(const c10::intrusive_ptr<c10::intrusive_ptr_target>& state,
                                              uint64_t increment);
// the absolute (seed, offset) the next replayed call's generator arguments draw at, in order
void set_replay_draws(std::vector<std::pair<uint64_t, uint64_t>> draws);
// the private pool of the capture recording the calling thread's current stream, if any (none while a
// graph replays)
std::optional<c10::MempoolId_t> capture_pool_here(c10::DeviceIndex device);

// pools.cpp: private memory pools (CUDA graph pools): allocations go to a pool while a capture into it
// records the thread's stream or the thread has begun allocating to it; a freed block of a live pool
// is kept (reserved, not allocated), never handed to another allocation; the pool's last user
// (retain/release: graphs, begun threads) gives its kept blocks back
int64_t mempool_take(c10::DeviceIndex device, void* data, void* ctx, bool adopted);  // the pool's tag, or 0
// the pool the calling thread allocates to now (a begun thread's, else its capture's), if any
std::optional<c10::MempoolId_t> mempool_here(c10::DeviceIndex device);
bool mempool_owner_gone(int64_t tag, void* data);  // true: the pool keeps the block (uncounted)
void mempool_retain(c10::DeviceIndex device, c10::MempoolId_t id);
void mempool_release(c10::DeviceIndex device, c10::MempoolId_t id);
void mempool_begin_thread(c10::DeviceIndex device, c10::MempoolId_t id);
void mempool_end_thread(c10::DeviceIndex device, c10::MempoolId_t id);
bool mempool_holds(c10::DeviceIndex device, c10::MempoolId_t id, const void* p);
std::vector<int64_t> mempool_allocated(c10::DeviceIndex device, c10::MempoolId_t id);  // a checkpoint
// the pool back to a checkpoint's allocated blocks; take_back: storages over them that get their deleter
void mempool_set_state(c10::DeviceIndex device, c10::MempoolId_t id, const std::vector<int64_t>& allocated,
                       const std::vector<c10::StorageImpl*>& take_back);
bool mempool_raw_delete(void* p);  // false: not a pool's block
void free_and_remove_deleter(c10::StorageImpl* s);  // the storage lets its block go and keeps no deleter
bool has_standard_deleter(const c10::StorageImpl* s);
// allocator.cpp, for pools.cpp: a pool block's counting, its return to the device, its owner's DataPtr
void pool_block_count(void* ctx, bool adopted, bool on);
void pool_block_return(void* ctx, bool adopted);
c10::DataPtr pool_block_owner(void* ctx, bool adopted, c10::DeviceIndex device);
bool is_device_deleter(c10::DeleterFnPtr d);

}  // namespace cudashim
