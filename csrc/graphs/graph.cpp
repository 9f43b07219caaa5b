// CUDA graphs on the emulated device: capture records the dispatcher calls, replay re-runs them.
//
// Between capture_begin and capture_end every call that reaches the device's dispatch key (the boxed
// fallback; the device's own copy_, softmax and c10d kernels call the hooks below) is recorded with its
// argument IValues: the tensors alias the captured memory, so a replay reads the program's static
// inputs as they are then and writes the very tensors the program holds (CUDA's static addresses).
// Replay re-enters the dispatcher at the device key only: no Python, no autograd or
// inference-mode layers, no argument parsing.
//
// What CUDA shows, kept here:
//  * capture runs nothing a program can see. An operator that only writes its arguments (in-place,
//    out=, copy_) is recorded and not run, unless it writes only memory allocated during the capture;
//    a functional operator runs once so its outputs exist with their shapes, in memory only the
//    graph uses; their contents are defined after a replay.
//  * the graph's memory is not given back until reset() or the graph's end (see "memory" below).
//  * capture belongs to a stream, as CUDA's stream capture does: a call is recorded when the calling
//    thread's current stream is the capture's (or a stream that joined it by waiting on it, through an
//    event or wait_stream). Another thread's work on its own stream runs, unrecorded; the autograd
//    engine's device thread works on the stream of the forward it differentiates, so a backward taken
//    inside a capture is recorded.
//  * a synchronizing call (.item(), nonzero, a blocking or pageable host copy, a stream's or an event's
//    synchronize() or query()) raises CUDA's capture error and invalidates the capture; capture_end then
//    fails as cudaStreamEndCapture does. Where, per capture_error_mode (cudaStreamCaptureMode): on a
//    capturing stream, or an event last recorded on one, always; on the capturing thread unless
//    "relaxed"; on any other thread only while a "global" capture is open. The device's
//    synchronize() is refused while any capture is open.
//  * every stream that joined a capture must be joined back: capture_end fails with CUDA's "capturing
//    stream has unjoined work" when the capture's stream has not waited (directly or through other
//    streams) on the last call recorded on each of them. The failed capture takes every stream out of
//    capture, as cudaStreamEndCapture does.
//  * memory: a capture allocates to the graph's private pool (pools.cpp), and under a device profile
//    the allocator model (cache_model.cpp) serves it from the same pool, begun and released at the
//    same points. As a call is recorded its tensors over the pool's memory get storages of the
//    graph's own that do not own it (detach_from_pool_memory): when the program drops its last
//    reference, during the capture or after it, the pool keeps the block for the replays, and it
//    leaves memory_allocated() (the model's block goes back to the model's pool), as CUDA's
//    allocator does. A replay's transient buffers are no pool's and are not counted in the model
//    (CUDA's replay allocates nothing).
//  * an operator's own error (a shape check) raised inside a capture leaves the capture valid: the
//    operator launched nothing, so capture_end succeeds and the program sees that error itself.
//  * random operators: generators are graph-safe. A capture leaves a generator's offset alone and
//    places each random call at an offset within the graph; each replay draws at the generator's
//    offset then plus that, and advances the generator past the whole graph, as CUDA's and torch_npu's
//    Philox offsets do (generator.cpp). On CUDA a generator other than the default one must be
//    registered (register_generator) or the call raises CUDA's error; torch_npu takes any generator.
#include "shim.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <ATen/core/GraphImplInterface.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace cudashim {
namespace {

struct Node {
  c10::OperatorHandle op;
  std::vector<c10::IValue> args;
  // a functional call's captured results: the replay's results are copied into them (empty when the
  // call writes its own arguments, or when it was rewritten to its out= overload at capture)
  std::vector<c10::IValue> outs;
  std::vector<RngDraw> draws;  // where its generator arguments draw within the graph (generator.cpp)
};

std::atomic<uint64_t> g_next_uid{1};

class Graph;
// The open captures and the streams they record, under g_capture_mutex. g_open counts them, so a call
// outside any capture costs one atomic load (every call of the fallback asks).
struct CaptureStream {
  c10::DeviceIndex device;
  c10::StreamId stream;
  Graph* graph;
};
std::mutex g_capture_mutex;
std::vector<CaptureStream> g_streams;
std::vector<Graph*> g_captures;
std::atomic<int> g_open{0};
thread_local int t_running = 0;         // >0: a recorded call runs now (its nested calls are not recorded)
thread_local int t_replaying = 0;       // >0: a graph replays on this thread
std::atomic<uint64_t> g_next_capture{1};

// the capture recording the calling thread's current stream, or nullptr
Graph* capture_here() {
  if (C10_LIKELY(g_open.load(std::memory_order_relaxed) == 0)) return nullptr;
  const c10::DeviceIndex d = current_device();
  const c10::StreamId s = current_stream_id(d);
  std::lock_guard<std::mutex> lock(g_capture_mutex);
  for (const CaptureStream& c : g_streams) {
    if (c.device == d && c.stream == s) return c.graph;
  }
  return nullptr;
}

bool is_write(const c10::Argument& a) { return a.alias_info() != nullptr && a.alias_info()->isWrite(); }

// the argument a return aliases (same alias set), or -1
int aliased_argument(const c10::FunctionSchema& s, const c10::Argument& ret) {
  if (ret.alias_info() == nullptr) return -1;
  const auto& args = s.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].alias_info() != nullptr && args[i].alias_info()->beforeSets() == ret.alias_info()->beforeSets()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// Operators whose out= overload computes otherwise than the functional one for outputs of the
// functional's shapes (the CPU's binary_cross_entropy_out takes `out` as the elementwise loss and
// resizes it: given the 0-dim result it writes elsewhere). Found by the graph-replay oracle
// (benchmarks/opdb_oracles.py); they replay functionally and their results are copied.
bool out_overload_differs(const c10::FunctionSchema& s) {
  static const std::unordered_set<std::string> differs = {"aten::binary_cross_entropy"};
  return differs.count(s.name()) != 0;
}

// the out= overload of a functional operator taking its arguments then one out tensor per return
std::optional<c10::OperatorHandle> out_overload(const c10::OperatorHandle& op) {
  const auto& s = op.schema();
  if (out_overload_differs(s)) return std::nullopt;
  for (const auto& r : s.returns()) {
    if (r.type()->kind() != c10::TypeKind::TensorType) return std::nullopt;
  }
  const std::string& ov = s.overload_name();
  auto h = c10::Dispatcher::singleton().findOp({s.name(), ov.empty() ? "out" : ov + "_out"});
  if (!h.has_value()) return std::nullopt;
  const auto& o = h->schema();
  const size_t n = s.arguments().size(), m = s.returns().size();
  if (o.arguments().size() != n + m) return std::nullopt;
  for (size_t i = 0; i < n; ++i) {
    if (o.arguments()[i].name() != s.arguments()[i].name() || is_write(o.arguments()[i])) return std::nullopt;
  }
  for (size_t i = n; i < n + m; ++i) {
    if (!is_write(o.arguments()[i])) return std::nullopt;
  }
  return h;
}

// A collective (c10d::) returns its Work: Gloo runs it on a thread of its own. The program waited for
// it at capture (dist.all_reduce does); a replay waits before the next call reads the result.
void wait_for_work(const torch::jit::Stack& stack) {
  for (const c10::IValue& v : stack) {
    if (v.isObject() && v.type()->str() == "__torch__.torch.classes.c10d.Work") v.toCustomClass<c10d::Work>()->wait();
  }
}

// A platform's own words for a refusal inside a capture and for the capture it invalidated, with
// "{what}" standing for the call (set_capture_words; empty: CUDA's, below). They are raised as the
// platform's runtime raises them: a RuntimeError (c10::Error), as torch_npu's NPU_CHECK_ERROR does.
std::mutex g_words_mutex;
std::string g_refused_words, g_invalidated_words;

std::string words(const std::string& form, const std::string& what) {
  std::string out = form;
  const size_t at = out.find("{what}");
  if (at != std::string::npos) out.replace(at, 6, what);
  return out;
}

[[noreturn]] void capture_error(const std::string& what, int code = 900) {
  {
    std::lock_guard<std::mutex> lock(g_words_mutex);
    if (!g_refused_words.empty()) throw c10::Error({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, words(g_refused_words, what));
  }
  // cudaErrorStreamCaptureUnsupported (or cudaErrorCapturedEvent), as PyTorch surfaces it (torch.AcceleratorError)
  const char* text = code == 907 ? "operation not permitted on an event last recorded in a capturing stream"
                                 : "operation not permitted when stream is capturing";
  throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, code,
                              std::string("CUDA error: ") + text + "\n(" + what +
                                  " is not allowed while a CUDA graph is being captured on the emulated device)");
}

// CUDA's default generator keeps its seed and offset for graphs in two one-element int64 device tensors
// (CUDAGeneratorState::register_graph), allocated when the first graph registers with it — first thing in
// capture_begin, before the capture allocates to its pool, so from the default pool on the capture's
// stream — and freed when the last
// one lets go: they count in memory_allocated() and take pool memory as on a GPU. Only their memory is
// kept (no tensor: nothing is dispatched, so nothing is recorded into the capture). Never destroyed at
// exit (the allocator may be gone by then).
std::mutex g_generator_mutex;
int g_generator_graphs[kMaxDevices] = {};
auto* const g_generator_memory = new std::array<std::array<c10::DataPtr, 2>, kMaxDevices>();

void generator_register_graph(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(g_generator_mutex);
  if (g_generator_graphs[device]++ == 0) {
    for (c10::DataPtr& p : (*g_generator_memory)[device]) p = device_allocator(device)->allocate(sizeof(int64_t));
  }
}

std::vector<int64_t> graph_state_of(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(g_generator_mutex);
  std::vector<int64_t> out;
  for (const c10::DataPtr& p : (*g_generator_memory)[device]) {
    if (p) out.push_back(reinterpret_cast<int64_t>(p.get()));
  }
  return out;
}

void generator_unregister_graph(c10::DeviceIndex device) {
  std::array<c10::DataPtr, 2> freed;  // freed outside the lock
  std::lock_guard<std::mutex> lock(g_generator_mutex);
  if (--g_generator_graphs[device] == 0) freed.swap((*g_generator_memory)[device]);
}

class Graph final : public at::GraphImplInterface {
 public:
  explicit Graph(const at::GraphImplArgs& args) : keep_graph_(args.keep_graph) {}
  ~Graph() override { reset(); }

  void capture_begin(at::MempoolId_t pool, at::GraphCaptureMode mode) override {
    TORCH_CHECK(!has_capture_, "This CUDAGraph instance already owns a captured graph. To capture a new graph, "
                "create a new instance or call reset() on the present instance.");
    const c10::DeviceIndex device = current_device();
    const c10::StreamId stream = current_stream_id(device);
    // CUDA's words (CUDAGraph::capture_begin): its default stream is the legacy stream, never captured
    TORCH_CHECK(stream != 0, "CUDA graphs must be captured on a non-default stream. (However, after capture, "
                "it's ok to replay them on the default stream.)");
    // CUDAGraph::capture_begin registers the graph with the default generator first, before the
    // capture allocates to its pool: the generator's graph state comes from the default pool, on the
    // capture's stream
    if (generator_device_ < 0) {
      generator_register_graph(device);
      generator_device_ = device;
    }
    {
      std::lock_guard<std::mutex> lock(g_capture_mutex);
      for (const CaptureStream& c : g_streams) {
        TORCH_CHECK(!(c.device == device && c.stream == stream), "CUDA error: operation not permitted when stream is "
                    "capturing (this stream is already being captured)");
      }
      TORCH_CHECK(!open_, "Called CUDAGraph::capture_begin while this graph's capture is under way");
      device_ = device;
      mode_ = mode == at::GraphCaptureMode::Default ? at::GraphCaptureMode::Global : mode;  // CUDA's default
      thread_ = std::this_thread::get_id();
      pool_ = (pool.first != 0 || pool.second != 0) ? pool : at::MempoolId_t{g_next_uid.fetch_add(1), 0};
      nodes_.clear();
      owned_.clear();
      own_tensors_.clear();
      own_storages_.clear();
      invalidated_.clear();
      origin_ = stream;
      work_.clear();
      seen_.clear();
      uid_ = g_next_capture.fetch_add(1);
      g_streams.push_back({device, stream, this});
      g_captures.push_back(this);
      open_ = true;
      g_open.fetch_add(1);
    }
    // beginAllocateToPool: the capture allocates to the pool (shared when the id is given), in memory
    // and in the allocator model alike (pools.cpp); the graph uses it until reset()
    mempool_retain(device, pool_);
    retained_ = true;
  }

  void capture_end() override {
    TORCH_CHECK(open_, "Called CUDAGraph::capture_end without a preceding capture_begin");
    const std::string unjoined = unjoined_stream();
    close();
    rng_ = capture_finish(uid_);  // capture_epilogue: each generator's whole-graph increment
    owned_.clear();
    own_tensors_.clear();
    own_storages_.clear();
    if (!invalidated_.empty() || !unjoined.empty()) {
      // the failed capture's graph still uses its pool until reset(): the pool keeps what it allocated
      nodes_.clear();
      if (!invalidated_.empty()) {
        {
          std::lock_guard<std::mutex> lock(g_words_mutex);
          if (!g_invalidated_words.empty()) {
            throw c10::Error({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, words(g_invalidated_words, invalidated_));
          }
        }
        throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, 901,
                                    "CUDA error: operation failed due to a previous error during capture (" +
                                        invalidated_ + ")");
      }
      // cudaErrorStreamCaptureUnjoined
      throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, 904,
                                  "CUDA error: capturing stream has unjoined work (" + unjoined +
                                      " did work the capture's stream never waited for: join it back with "
                                      "wait_stream before the capture ends)");
    }
    has_capture_ = true;
    if (!keep_graph_) instantiate();
  }

  void instantiate() override {
    TORCH_CHECK(has_capture_, "Called CUDAGraph::instantiate without a preceding successful capture.");
    has_exec_ = true;
  }

  void replay() override {
    TORCH_CHECK(has_capture_, "Called CUDAGraph::replay without a preceding successful capture.");
    if (!has_exec_) instantiate();
    const c10::DispatchKeySet keys(kKey);
    ++t_running;
    ++t_replaying;
    struct Done {
      ~Done() {
        --t_running;
        --t_replaying;
      }
    } done;
    // replay_prologue: each generator the graph draws from gives its offset now and moves past the graph
    std::vector<std::pair<const c10::intrusive_ptr_target*, std::pair<uint64_t, uint64_t>>> bases;
    for (const auto& [state, increment] : rng_) bases.emplace_back(state.get(), replay_prologue(state, increment));
    struct NoDraws {
      ~NoDraws() { set_replay_draws({}); }
    } no_draws;
    torch::jit::Stack stack;
    for (const Node& node : nodes_) {
      if (!node.draws.empty()) {
        std::vector<std::pair<uint64_t, uint64_t>> at;
        for (const RngDraw& d : node.draws) {
          auto base = std::find_if(bases.begin(), bases.end(), [&](const auto& b) { return b.first == d.state.get(); });
          const auto [seed, offset] = base != bases.end() ? base->second : replay_prologue(d.state, 0);
          at.emplace_back(seed, offset + d.offset);
        }
        set_replay_draws(std::move(at));
      }
      stack.assign(node.args.begin(), node.args.end());
      node.op.redispatchBoxed(keys, &stack);
      if (!node.draws.empty()) set_replay_draws({});
      wait_for_work(stack);
      for (size_t i = 0; i < node.outs.size(); ++i) {
        if (node.outs[i].isTensor()) {
          copy_result(node.outs[i].toTensor(), stack[i].toTensor());
        } else if (node.outs[i].isTensorList()) {  // a functional operator's Tensor[] (_foreach_*, histogramdd's edges)
          const auto dst = node.outs[i].toTensorList();
          const auto src = stack[i].toTensorList();
          for (size_t j = 0; j < dst.size() && j < src.size(); ++j) copy_result(dst.get(j), src.get(j));
        }
      }
      stack.clear();
    }
  }

  // a replay's result into the tensor the capture handed the program
  static void copy_result(const at::Tensor& dst, const at::Tensor& src) {
    if (!dst.defined() || !src.defined() || dst.unsafeGetTensorImpl() == src.unsafeGetTensorImpl()) return;
    TORCH_CHECK(dst.has_storage() && src.has_storage(), "CUDA graph replay on the emulated device: ", dst.layout(),
                " results of a captured operator cannot be replayed into the captured ones; capture dense tensors");
    cpu_view(dst, false).copy_(cpu_view(src, false));
  }

  void reset() override {
    close();
    if (rng_.empty() && uid_ != 0) rng_ = capture_finish(uid_);  // a capture reset while open
    rng_.clear();
    nodes_.clear();
    own_tensors_.clear();
    own_storages_.clear();
    has_capture_ = has_exec_ = false;
    let_go_of_pool();  // releasePool
  }

  at::MempoolId_t pool() const override { return pool_; }
  void enable_debug_mode() override { debug_ = true; }
  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_, "CUDA Graphs debug not enabled, set with [graph].enable_debug_mode()");
    std::ofstream f(path);
    for (const Node& n : nodes_) f << n.op.schema() << (n.outs.empty() ? "" : "  [functional]") << "\n";
  }

  // --- recording (the hooks below) ---
  c10::DeviceIndex device() const { return device_; }
  at::GraphCaptureMode mode() const { return mode_; }
  std::thread::id thread() const { return thread_; }
  uint64_t uid() const { return uid_; }
  // a call recorded from `stream`, one of the capture's (under g_capture_mutex: joins read it)
  void record(Node node, c10::StreamId stream) {
    detach_from_pool_memory(node);
    nodes_.push_back(std::move(node));
    std::lock_guard<std::mutex> lock(g_capture_mutex);
    const uint64_t n = ++work_[stream];
    seen_[stream][stream] = n;
  }
  // `to` waits on `from` (both the capture's): it has seen all `from` had seen (under g_capture_mutex)
  void join(c10::StreamId from, c10::StreamId to) {
    if (seen_.count(from) == 0) return;
    auto& dst = seen_[to];
    for (const auto& [s, n] : seen_[from]) dst[s] = std::max(dst[s], n);
  }
  // the first stream whose last recorded call the capture's stream never waited for, or ""
  std::string unjoined_stream() {
    std::lock_guard<std::mutex> lock(g_capture_mutex);
    auto& origin = seen_[origin_];
    for (const auto& [s, n] : work_) {
      if (s != origin_ && origin[s] < n) return "stream " + std::to_string(s);
    }
    return "";
  }
  void own(const at::Tensor& t) {
    if (t.defined() && t.device().type() == kType && t.has_storage()) owned_.insert(t.storage().data());
  }
  bool owns(const at::Tensor& t) const { return t.has_storage() && owned_.count(t.storage().data()) != 0; }
  void invalidate(const std::string& why) {  // under g_capture_mutex: another thread may invalidate it
    if (invalidated_.empty()) invalidated_ = why;
  }
  size_t size() const { return nodes_.size(); }

 private:
  // the capture's streams leave the registry; its recording ends
  void close() {
    std::lock_guard<std::mutex> lock(g_capture_mutex);
    if (!open_) return;
    open_ = false;
    g_open.fetch_sub(1);
    g_captures.erase(std::remove(g_captures.begin(), g_captures.end(), this), g_captures.end());
    g_streams.erase(std::remove_if(g_streams.begin(), g_streams.end(), [this](const CaptureStream& c) {
                      return c.graph == this;
                    }), g_streams.end());
  }

  void let_go_of_pool() {
    if (generator_device_ >= 0) {
      generator_unregister_graph(generator_device_);
      generator_device_ = -1;
    }
    if (!retained_) return;
    retained_ = false;
    mempool_release(device_, pool_);
  }

  // A recorded call's tensors over the memory of the graph's pool (allocated during the capture, or
  // before it into the same pool: Inductor's CUDA graph trees copy inputs there) get storages of the
  // graph's own, which do not own that memory (the pool keeps it while the graph uses the pool): the
  // program's tensors over it can be freed, or their storages invalidated (the trees do both), and
  // replay still reads and writes the memory, as CUDA's graph does its addresses. Done as the call is
  // recorded, so a block the program drops during the capture leaves memory_allocated() at once (and
  // goes back to the allocator model's pool, which serves the capture's later requests), as on CUDA.
  void detach_from_pool_memory(Node& node) {
    auto detach = [&](const at::Tensor& t) -> at::Tensor {
      if (!t.defined() || t.device().type() != kType || !t.has_storage()) return t;
      const c10::Storage& s = t.storage();
      if (!mempool_holds(device_, pool_, s.data())) return t;  // not the pool's: the graph keeps its owner
      auto seen = own_tensors_.find(t.unsafeGetTensorImpl());
      if (seen != own_tensors_.end()) return seen->second.second;
      auto it = own_storages_.find(s.unsafeGetStorageImpl());
      if (it == own_storages_.end()) {
        c10::Storage own(c10::Storage::use_byte_size_t(), s.nbytes(),
                         c10::DataPtr(const_cast<void*>(s.data()), t.device()), nullptr, false);
        it = own_storages_.emplace(s.unsafeGetStorageImpl(), std::make_pair(s.getWeakStorageImpl(), std::move(own)))
                 .first;
      }
      at::Tensor d = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(it->second.second), t.key_set(), t.dtype());
      d.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
      own_tensors_.emplace(t.unsafeGetTensorImpl(), std::make_pair(WeakTensor(t.getIntrusivePtr()), d));
      return d;
    };
    auto detach_value = [&](c10::IValue& v) {
      if (v.isTensor()) {
        v = detach(v.toTensor());
      } else if (v.isTensorList()) {
        auto list = v.toTensorList();
        for (size_t i = 0; i < list.size(); ++i) list.set(i, detach(list.get(i)));
      } else if (v.isList()) {  // Tensor?[] (index_put_'s indices)
        auto list = v.toList();
        for (size_t i = 0; i < list.size(); ++i) {
          const c10::IValue e = list.get(i);
          if (e.isTensor()) list.set(i, detach(e.toTensor()));
        }
      }
    };
    for (c10::IValue& v : node.args) detach_value(v);
    for (c10::IValue& v : node.outs) detach_value(v);
  }

  bool keep_graph_;
  // the generator states the capture drew from, with their whole-graph increments
  std::vector<std::pair<c10::intrusive_ptr<c10::intrusive_ptr_target>, uint64_t>> rng_;
  c10::DeviceIndex generator_device_ = -1;  // registered with that device's default generator
  bool retained_ = false;  // this graph is a user of pool_ (capture_begin until reset() or its end)
  bool has_capture_ = false, has_exec_ = false, debug_ = false;
  bool open_ = false;  // capture_begin..capture_end (under g_capture_mutex)
  at::GraphCaptureMode mode_ = at::GraphCaptureMode::Global;
  std::thread::id thread_;
  c10::DeviceIndex device_ = 0;
  at::MempoolId_t pool_{0, 0};
  uint64_t uid_ = 0;  // this capture's id (an event recorded during it is a captured event)
  c10::StreamId origin_ = 0;
  std::map<c10::StreamId, uint64_t> work_;                           // calls recorded per stream
  std::map<c10::StreamId, std::map<c10::StreamId, uint64_t>> seen_;  // per stream: what it waited for
  std::vector<Node> nodes_;
  std::unordered_set<const void*> owned_;  // memory allocated during the capture (contents undefined to the program)
  // during the capture, the graph's own tensor and storage for each of the program's over the pool, so
  // a tensor several calls use stays one tensor in the graph; the weak references keep the program's
  // TensorImpl and StorageImpl addresses from being reused meanwhile (they free nothing else)
  using WeakTensor = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  std::unordered_map<const c10::TensorImpl*, std::pair<WeakTensor, at::Tensor>> own_tensors_;
  std::unordered_map<const c10::StorageImpl*, std::pair<c10::weak_intrusive_ptr<c10::StorageImpl>, c10::Storage>>
      own_storages_;
  std::string invalidated_;
};

std::mutex g_gen_mutex;
std::unordered_set<const c10::GeneratorImpl*> g_registered;  // extra generators registered as graph-safe

// CUDA's graphs take a generator other than the default one only once registered with them; torch_npu
// registers any generator with the capturing graph at its first use (NPUGeneratorState::get_capture_state)
void check_generator(const c10::IValue& v, c10::DeviceIndex device) {
  if (!v.isGenerator() || !is_cuda()) return;
  const c10::GeneratorImpl* g = v.toGenerator().unsafeGetGeneratorImpl();
  if (g == default_generator(device).unsafeGetGeneratorImpl()) return;
  std::lock_guard<std::mutex> lock(g_gen_mutex);
  TORCH_CHECK(g_registered.count(g) != 0, "Attempt to increase offset for a CUDA generator not in capture mode.");
}

}  // namespace

bool capturing() { return t_running == 0 && capture_here() != nullptr; }
bool graph_replaying() { return t_replaying != 0; }

bool capture_underway() { return capture_here() != nullptr; }
bool capture_open() { return g_open.load() != 0; }

std::optional<c10::MempoolId_t> capture_pool_here(c10::DeviceIndex device) {
  // a replay's calls are no capture's, even inside one (CUDA's replay allocates nothing)
  if (C10_LIKELY(g_open.load(std::memory_order_relaxed) == 0) || t_replaying != 0) return std::nullopt;
  const c10::StreamId s = current_stream_id(device);
  std::lock_guard<std::mutex> lock(g_capture_mutex);
  for (const CaptureStream& c : g_streams) {
    if (c.device == device && c.stream == s) return c.graph->pool();
  }
  return std::nullopt;
}

namespace {
// Refuse a call that may synchronize, as CUDA does under capture (see the header): `direct` is the
// capture the call touches itself (its stream or event), else the calling thread's mode decides.
// Under g_capture_mutex; returns the capture invalidated, or nullptr when the call is allowed.
Graph* refused_by(Graph* direct, std::string& why) {
  if (direct != nullptr) return direct;
  const auto me = std::this_thread::get_id();
  for (Graph* c : g_captures) {
    if (c->thread() == me ? c->mode() != at::GraphCaptureMode::Relaxed : c->mode() == at::GraphCaptureMode::Global) {
      if (c->thread() != me) why += " on another thread, while a capture in \"global\" capture_error_mode is open";
      return c;
    }
  }
  return nullptr;
}

Graph* capture_of(c10::DeviceIndex device, c10::StreamId stream) {  // under g_capture_mutex
  for (const CaptureStream& c : g_streams) {
    if (c.device == device && c.stream == stream) return c.graph;
  }
  return nullptr;
}

// whether a refused call on a stream (a stream's synchronisation, .item(), a blocking copy) ends the
// capture: CUDA's capture is invalidated; CANN's refuses the call and the capture goes on
std::atomic<bool> g_stream_refusal_invalidates{true};

void refuse(c10::DeviceIndex device, c10::StreamId stream, const char* what) {
  if (C10_LIKELY(g_open.load(std::memory_order_relaxed) == 0)) return;
  std::string why = what;
  {
    std::lock_guard<std::mutex> lock(g_capture_mutex);
    Graph* g = refused_by(capture_of(device, stream), why);
    if (g == nullptr) return;
    if (g_stream_refusal_invalidates.load()) g->invalidate(why);
  }
  capture_error(why);
}
}  // namespace

void set_stream_refusal_invalidates(bool on) { g_stream_refusal_invalidates = on; }

void capture_refuse(const char* what) {
  if (C10_LIKELY(g_open.load(std::memory_order_relaxed) == 0)) return;
  const c10::DeviceIndex d = current_device();
  refuse(d, current_stream_id(d), what);
}

void capture_refuse_stream(c10::DeviceIndex device, c10::StreamId stream, const char* what) {
  refuse(device, stream, what);
}

uint64_t capture_of_stream(c10::DeviceIndex device, c10::StreamId stream) {
  if (C10_LIKELY(g_open.load(std::memory_order_relaxed) == 0)) return 0;
  std::lock_guard<std::mutex> lock(g_capture_mutex);
  Graph* g = capture_of(device, stream);
  return g == nullptr ? 0 : g->uid();
}

void capture_refuse_event(uint64_t capture, const char* what) {
  if (C10_LIKELY(g_open.load(std::memory_order_relaxed) == 0)) return;
  std::string why = what;
  Graph* direct = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_capture_mutex);
    for (Graph* c : g_captures) {
      if (capture != 0 && c->uid() == capture) direct = c;
    }
    Graph* g = refused_by(direct, why);
    if (g == nullptr) return;
    g->invalidate(why);
  }
  capture_error(why, direct != nullptr ? 907 : 900);  // cudaErrorCapturedEvent for a captured event
}

void capture_refuse_device(const char* what) {
  if (C10_LIKELY(g_open.load(std::memory_order_relaxed) == 0)) return;
  {
    std::lock_guard<std::mutex> lock(g_capture_mutex);
    if (g_captures.empty()) return;
    for (Graph* c : g_captures) c->invalidate(what);
  }
  capture_error(what);
}

void capture_join(c10::DeviceIndex device, c10::StreamId from, c10::StreamId to) {
  if (C10_LIKELY(g_open.load(std::memory_order_relaxed) == 0) || from == to) return;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(g_capture_mutex);
    Graph* g = capture_of(device, from);
    if (g == nullptr) return;
    Graph* joined = capture_of(device, to);
    if (joined != nullptr) {  // already capturing: it has now seen what `from` had done
      if (joined == g) g->join(from, to);
      return;
    }
    if (to != 0) {
      g_streams.push_back({device, to, g});
      g->join(from, to);
      return;
    }
    // CUDA's default stream is the legacy stream, which no capture may take in: the whole-network
    // capture recipe warms up and captures on side streams for this reason
    why = "the default stream waiting on a capturing stream (warm up and capture on side streams)";
    g->invalidate(why);
  }
  capture_error(why);
}

bool capture_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Graph* g = capture_here();
  if (g == nullptr) return false;  // the capture ended meanwhile: the call runs
  const c10::StreamId stream = current_stream_id(current_device());
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  const size_t base = stack->size() - n;
  Node node{op, std::vector<c10::IValue>(stack->begin() + base, stack->end()), {}};
  for (const auto& v : node.args) check_generator(v, g->device());
  node.draws = capture_draws(schema, node.args, g->device(), g->uid());

  // an operator whose every return is one of the arguments it writes: recorded, not run
  bool writes_only = false;
  for (const auto& a : schema.arguments()) writes_only = writes_only || is_write(a);
  std::vector<int> aliased;
  for (const auto& r : schema.returns()) {
    const int i = aliased_argument(schema, r);
    writes_only = writes_only && i >= 0;
    aliased.push_back(i);
  }
  // ... and run now as well when it writes only the capture's own memory, whose contents the program
  // cannot see yet: the capture's later calls then read what eager execution would give them (an
  // index computed inside the capture stays in range)
  if (writes_only) {
    bool own = true;
    for (size_t i = 0; i < n && own; ++i) {
      if (!is_write(schema.arguments()[i])) continue;
      const c10::IValue& v = node.args[i];
      if (v.isTensor()) {
        own = g->owns(v.toTensor());
      } else if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorList()) own = own && g->owns(t);
      }
    }
    if (!own) {
      stack->erase(stack->begin() + base, stack->end());
      for (int i : aliased) stack->push_back(node.args[i]);
      g->record(std::move(node), stream);
      return true;
    }
  }

  // a functional operator: run once now (its outputs get their shapes), then replayed
  ++t_running;
  try {
    op.redispatchBoxed(c10::DispatchKeySet(kKey), stack);
  } catch (...) {  // the operator's own error: nothing was launched, the capture stays valid
    --t_running;
    throw;
  }
  --t_running;
  const size_t m = schema.returns().size();
  std::vector<c10::IValue> outs(stack->end() - m, stack->end());
  for (const auto& o : outs) {
    if (o.isTensor()) g->own(o.toTensor());
    if (o.isTensorList()) {
      for (const at::Tensor& t : o.toTensorList()) g->own(t);
    }
  }
  auto out = writes_only ? std::nullopt : out_overload(op);
  if (out.has_value()) {  // replay writes the captured outputs directly
    node.op = *out;
    for (auto& o : outs) node.args.push_back(o);
  } else if (!writes_only) {
    node.outs = std::move(outs);
  }
  g->record(std::move(node), stream);
  return true;
}

bool capture_copy(const at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  const bool self_dev = self.device().type() == kType, src_dev = src.device().type() == kType;
  if (self_dev != src_dev) {
    const at::Tensor& host = self_dev ? src : self;
    if (!non_blocking) capture_refuse("a blocking copy between host and device (it synchronizes)");
    // PyTorch's own check on CUDA (raised before the stream is touched: the capture goes on)
    TORCH_CHECK(is_pinned_ptr(host.storage().data()), "Cannot copy between CPU and CUDA tensors during CUDA graph "
                "capture unless the CPU tensor is pinned. Please use tensor.pin_memory() or allocate the tensor with "
                "pin_memory=True.");
  }
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
  Graph* g = capture_here();
  if (g == nullptr) return true;  // the capture ended meanwhile: the copy runs
  const bool run = self_dev && g->owns(self);
  g->record(Node{op, {self, src, non_blocking}, {}}, current_stream_id(current_device()));
  return run;
}

at::Tensor capture_call(const char* name, std::vector<c10::IValue> args) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  torch::jit::Stack stack(std::move(args));
  if (!capture_boxed(op, &stack)) op.redispatchBoxed(c10::DispatchKeySet(kKey), &stack);
  return stack.back().toTensor();
}

at::Tensor capture_note(at::Tensor t) {
  Graph* g = capture_here();
  if (C10_UNLIKELY(g != nullptr)) g->own(t);
  return t;
}

void set_capture_words(const std::string& refused, const std::string& invalidated) {
  std::lock_guard<std::mutex> lock(g_words_mutex);
  g_refused_words = refused;
  g_invalidated_words = invalidated;
}

void register_generator(const at::Generator& g) {
  std::lock_guard<std::mutex> lock(g_gen_mutex);
  g_registered.insert(g.unsafeGetGeneratorImpl());
}

}  // namespace cudashim

namespace cudashim {
// at::accelerator::Graph (torch.accelerator.Graph) finds this by the device type's name; preferred over
// a CUDA build's own CUDAGraph, registered under the same name before this library loads
void register_graph() {
  using at::GraphImplRegistry, at::RegistererGraphImplRegistry;  // the registration macro names them unqualified
  C10_REGISTER_TYPED_CLASS_WITH_PRIORITY(GraphImplRegistry, c10::DeviceTypeName(kType, false), c10::REGISTRY_PREFERRED, Graph)
}
std::vector<int64_t> generator_graph_state(c10::DeviceIndex device) { return graph_state_of(device); }

}  // namespace cudashim
