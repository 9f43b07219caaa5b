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
//  * the graph's memory (every tensor a recorded call holds) is not given back until reset() or
//    the graph's end. Without a device profile it counts in memory_allocated() meanwhile; under one
//    the allocator model counts it as CUDA does (see "memory" below).
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
//  * memory: a tensor allocated during the capture is in the graph's private pool of the allocator
//    model (cache_model.cpp). The graph holds its own aliases of such tensors, so the model frees the
//    block when the program drops its last reference, as CUDA's allocator does, while the graph keeps
//    the memory for its replays; a replay's transient buffers are not counted (CUDA's replay
//    allocates nothing).
//  * an operator's own error (a shape check) raised inside a capture leaves the capture valid: the
//    operator launched nothing, so capture_end succeeds and the program sees that error itself.
//  * random operators: the device's default generators are graph-safe (registered at
//    capture_begin): each replay draws new numbers and advances them, as CUDA's Philox offsets
//    do; another generator must be registered (register_generator) or the call raises CUDA's error.
#include "shim.h"

#include <algorithm>
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

// Graphs holding tensors allocated during their capture (see Graph::alias), for release_dead()
std::mutex g_held_mutex;
std::vector<Graph*> g_holders;
std::atomic<int> g_holding{0};

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

// the out= overload of a functional operator taking its arguments then one out tensor per return
std::optional<c10::OperatorHandle> out_overload(const c10::OperatorHandle& op) {
  const auto& s = op.schema();
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

[[noreturn]] void capture_error(const std::string& what, int code = 900) {
  // cudaErrorStreamCaptureUnsupported (or cudaErrorCapturedEvent), as PyTorch surfaces it (torch.AcceleratorError)
  const char* text = code == 907 ? "operation not permitted on an event last recorded in a capturing stream"
                                 : "operation not permitted when stream is capturing";
  throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, code,
                              std::string("CUDA error: ") + text + "\n(" + what +
                                  " is not allowed while a CUDA graph is being captured on the emulated device)");
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
    // beginAllocateToPool: the capture's allocations go to its pool (shared when the id is given)
    if (model_active()) model_pool_begin(device_, pool_);
    in_pool_ = model_active();
  }

  void capture_end() override {
    TORCH_CHECK(open_, "Called CUDAGraph::capture_end without a preceding capture_begin");
    const std::string unjoined = unjoined_stream();
    close();
    owned_.clear();
    if (!invalidated_.empty() || !unjoined.empty()) {
      // a failed capture keeps its pool, as CUDA's allocator does (releasePool follows a capture that ended)
      in_pool_ = false;
      nodes_.clear();
      drop_held();
      if (!invalidated_.empty()) {
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
    torch::jit::Stack stack;
    for (const Node& node : nodes_) {
      stack.assign(node.args.begin(), node.args.end());
      node.op.redispatchBoxed(keys, &stack);
      wait_for_work(stack);
      for (size_t i = 0; i < node.outs.size(); ++i) {
        if (!node.outs[i].isTensor()) continue;
        const at::Tensor& dst = node.outs[i].toTensor();
        const at::Tensor& src = stack[i].toTensor();
        if (dst.unsafeGetTensorImpl() != src.unsafeGetTensorImpl()) cpu_view(dst, false).copy_(cpu_view(src, false));
      }
      stack.clear();
    }
  }

  void reset() override {
    close();
    nodes_.clear();
    drop_held();
    if (has_capture_ && in_pool_) model_pool_release(device_, pool_);  // releasePool
    in_pool_ = false;
    has_capture_ = has_exec_ = false;
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
    for (auto& v : node.args) v = alias(v);
    for (auto& v : node.outs) v = alias(v);
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
  // the program's memory is freed for the model when only the graph's aliases still hold it
  void release_dead() {
    for (Held& h : held_) {
      if (!h.released && h.storage.use_count() == h.refs) h.released = model_detach(h.storage.unsafeGetStorageImpl());
    }
  }
  void own(const at::Tensor& t) {
    if (t.defined() && t.device().type() == kType) owned_.insert(t.storage().data());
  }
  bool owns(const at::Tensor& t) const { return owned_.count(t.storage().data()) != 0; }
  void invalidate(const std::string& why) {  // under g_capture_mutex: another thread may invalidate it
    if (invalidated_.empty()) invalidated_ = why;
  }
  size_t size() const { return nodes_.size(); }

 private:
  struct Held {
    c10::Storage storage;
    int64_t refs;  // the references the graph holds: this one and its aliases' tensors
    bool released;
  };

  // a tensor the graph keeps for its replays: one allocated during the capture becomes the graph's own
  // TensorImpl over the same storage, so the program's references can be told from the graph's
  c10::IValue alias(const c10::IValue& v) {
    if (!in_pool_) return v;
    if (v.isTensor()) return alias_tensor(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      bool any = false;
      for (const at::Tensor& t : v.toTensorList()) {
        at::Tensor a = alias_tensor(t);
        any = any || a.unsafeGetTensorImpl() != t.unsafeGetTensorImpl();
        list.push_back(std::move(a));
      }
      return any ? c10::IValue(list) : v;
    }
    return v;
  }
  at::Tensor alias_tensor(const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kType || !owns(t) || !t.has_storage()) return t;
    c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    auto it = held_index_.find(impl);
    if (it == held_index_.end()) {
      std::lock_guard<std::mutex> lock(g_held_mutex);
      if (held_.empty()) {
        g_holders.push_back(this);
        g_holding.fetch_add(1);
      }
      it = held_index_.emplace(impl, held_.size()).first;
      held_.push_back({t.storage(), 1, false});
    }
    held_[it->second].refs += 1;
    return at::Tensor(t.unsafeGetTensorImpl()->shallow_copy_and_detach(c10::VariableVersion(0), false));
  }
  void drop_held() {
    {
      std::lock_guard<std::mutex> lock(g_held_mutex);
      if (held_.empty()) return;
      g_holders.erase(std::remove(g_holders.begin(), g_holders.end(), this), g_holders.end());
      g_holding.fetch_sub(1);
    }
    std::vector<Held> held;
    held.swap(held_);  // the storages go after the lock: a free may reach the allocator
    held_index_.clear();
  }

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

  bool keep_graph_;
  bool has_capture_ = false, has_exec_ = false, debug_ = false;
  bool open_ = false;  // capture_begin..capture_end (under g_capture_mutex)
  at::GraphCaptureMode mode_ = at::GraphCaptureMode::Global;
  std::thread::id thread_;
  c10::DeviceIndex device_ = 0;
  at::MempoolId_t pool_{0, 0};
  bool in_pool_ = false;  // the allocator model routed this capture to its pool
  uint64_t uid_ = 0;      // this capture's id (an event recorded during it is a captured event)
  c10::StreamId origin_ = 0;
  std::map<c10::StreamId, uint64_t> work_;                           // calls recorded per stream
  std::map<c10::StreamId, std::map<c10::StreamId, uint64_t>> seen_;  // per stream: what it waited for
  std::vector<Held> held_;
  std::unordered_map<const c10::StorageImpl*, size_t> held_index_;
  std::vector<Node> nodes_;
  std::unordered_set<const void*> owned_;  // memory allocated during the capture (contents undefined to the program)
  std::string invalidated_;
};

std::mutex g_gen_mutex;
std::unordered_set<const c10::GeneratorImpl*> g_registered;  // extra generators registered as graph-safe

void check_generator(const c10::IValue& v, c10::DeviceIndex device) {
  if (!v.isGenerator()) return;
  const c10::GeneratorImpl* g = v.toGenerator().unsafeGetGeneratorImpl();
  if (g == default_generator(device).unsafeGetGeneratorImpl()) return;
  std::lock_guard<std::mutex> lock(g_gen_mutex);
  TORCH_CHECK(g_registered.count(g) != 0, "Attempt to increase offset for a CUDA generator not in capture mode.");
}

}  // namespace

bool capturing() { return t_running == 0 && capture_here() != nullptr; }
bool graph_replaying() { return t_replaying != 0; }

std::optional<std::pair<uint64_t, uint64_t>> capture_pool_here() {
  if (C10_LIKELY(g_open.load(std::memory_order_relaxed) == 0) || t_replaying != 0) return std::nullopt;
  Graph* g = capture_here();
  if (g == nullptr) return std::nullopt;
  const auto p = g->pool();
  return std::make_pair(static_cast<uint64_t>(p.first), static_cast<uint64_t>(p.second));
}

void graph_release_dead() {
  if (C10_LIKELY(g_holding.load(std::memory_order_relaxed) == 0)) return;
  std::lock_guard<std::mutex> lock(g_held_mutex);
  for (Graph* g : g_holders) g->release_dead();
}
bool capture_underway() { return capture_here() != nullptr; }
bool capture_open() { return g_open.load() != 0; }

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

void refuse(c10::DeviceIndex device, c10::StreamId stream, const char* what) {
  if (C10_LIKELY(g_open.load(std::memory_order_relaxed) == 0)) return;
  std::string why = what;
  {
    std::lock_guard<std::mutex> lock(g_capture_mutex);
    Graph* g = refused_by(capture_of(device, stream), why);
    if (g == nullptr) return;
    g->invalidate(why);
  }
  capture_error(why);
}
}  // namespace

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

void register_generator(const at::Generator& g) {
  std::lock_guard<std::mutex> lock(g_gen_mutex);
  g_registered.insert(g.unsafeGetGeneratorImpl());
}

}  // namespace cudashim

namespace at {
// at::accelerator::Graph (torch.accelerator.Graph) finds this by the device type's name
C10_REGISTER_TYPED_CLASS(GraphImplRegistry, c10::DeviceTypeName(cudashim::kType, false), cudashim::Graph)
}  // namespace at
