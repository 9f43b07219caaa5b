// The Python face of the core: what cudashim/emulated/ needs to be torch.cuda's device module.
#include "shim.h"

#include <limits>

#include <ATen/native/Resize.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

namespace cudashim {
namespace {

py::dict stats(c10::DeviceIndex index) {
  const DeviceStats s = device_stats(index);
  py::dict d;
  d["allocated"] = s.allocated;
  d["allocated_peak"] = s.allocated_peak;
  d["allocations"] = s.allocations;
  d["allocations_peak"] = s.allocations_peak;
  d["allocated_total"] = s.allocated_total;
  d["freed_total"] = s.freed_total;
  d["num_alloc"] = s.num_alloc;
  d["num_free"] = s.num_free;
  d["reserved"] = s.reserved;
  d["reserved_peak"] = s.reserved_peak;
  d["segments"] = s.segments;
  d["segments_peak"] = s.segments_peak;
  d["reserved_total"] = s.reserved_total;
  d["released_total"] = s.released_total;
  d["num_segment_alloc"] = s.num_segment_alloc;
  d["num_segment_free"] = s.num_segment_free;
  d["num_ooms"] = num_ooms(index);
  return d;
}

// memory_stats() as CUDA's caching allocator reports it (the model's: cache_model.cpp)
py::dict model_stats_dict(c10::DeviceIndex index) {
  const ModelStats m = model_stats(check_index(index));
  static const char* names[] = {"allocation", "segment", "active", "inactive_split", "allocated_bytes",
                                "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes"};
  static const char* pools[] = {"all", "small_pool", "large_pool"};
  py::dict d;
  for (int i = 0; i < 9; ++i) {
    py::dict per_pool;
    for (int p = 0; p < 3; ++p) {
      const auto& s = m.stat[i * 3 + p];
      py::dict stat;
      stat["current"] = s.current;
      stat["peak"] = s.peak;
      stat["allocated"] = s.allocated;
      stat["freed"] = s.freed;
      per_pool[pools[p]] = stat;
    }
    d[names[i]] = per_pool;
  }
  d["num_alloc_retries"] = m.num_alloc_retries;
  d["num_ooms"] = m.num_ooms;
  d["num_device_alloc"] = m.num_device_alloc;
  d["num_device_free"] = m.num_device_free;
  return d;
}

// the preflight's Python observer, called with the GIL (allocations run with it released)
py::object* g_memory_observer = nullptr;

void call_memory_observer(c10::DeviceIndex device, int event, int64_t bytes) {
  if (!Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  if (g_memory_observer == nullptr) return;
  try {
    (*g_memory_observer)(static_cast<int>(device), event, bytes);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("cudashim memory observer");
  }
}

void set_observer(py::object fn) {
  set_memory_observer(nullptr);
  // the previous object is kept alive: a thread may be calling it still
  g_memory_observer = fn.is_none() ? nullptr : new py::object(std::move(fn));
  if (g_memory_observer != nullptr) set_memory_observer(&call_memory_observer);
}

// the device module's mem_get_info(device) -> (free, total), asked with the GIL
py::object* g_memory_info_fn = nullptr;

std::pair<size_t, size_t> call_memory_info(c10::DeviceIndex device) {
  py::gil_scoped_acquire gil;
  TORCH_CHECK(g_memory_info_fn != nullptr, "cudashim: the device's memory information is not available yet");
  auto pair = (*g_memory_info_fn)(static_cast<int>(device)).cast<std::pair<int64_t, int64_t>>();
  return {static_cast<size_t>(pair.first), static_cast<size_t>(pair.second)};
}

void set_memory_info(py::object fn) {
  // the previous object is kept alive: a thread may be calling it still
  g_memory_info_fn = fn.is_none() ? nullptr : new py::object(std::move(fn));
  set_memory_info_source(g_memory_info_fn == nullptr ? nullptr : &call_memory_info);
}

py::dict host_stats_dict() {
  const PinnedStats p = pinned_stats();
  auto stat = [](const PinnedStats::Stat& s) {
    py::dict d;
    d["current"] = s.current;
    d["peak"] = s.peak;
    d["allocated"] = s.allocated;
    d["freed"] = s.freed;
    return d;
  };
  py::dict d;
  d["allocations"] = stat(p.allocations);
  d["allocated_bytes"] = stat(p.allocated_bytes);
  d["active_requests"] = stat(p.active_requests);
  d["active_bytes"] = stat(p.active_bytes);
  d["num_host_alloc"] = p.num_host_alloc;
  d["num_host_free"] = p.num_host_free;
  for (auto [name, t] : {std::pair{"host_alloc_time", &p.host_alloc_time}, {"host_free_time", &p.host_free_time}}) {
    py::dict e;
    e["total"] = t->total;
    e["max"] = t->max;
    e["min"] = t->min;
    e["count"] = t->count;
    e["avg"] = t->count == 0 ? 0 : t->total / t->count;
    d[name] = e;
  }
  return d;
}

py::list model_segments_list(c10::DeviceIndex index) {
  py::list out;
  for (const ModelSegment& seg : model_segments(check_index(index))) {
    py::dict d;
    d["address"] = seg.address;
    d["total_size"] = seg.total_size;
    d["allocated_size"] = seg.allocated_size;
    d["requested_size"] = seg.requested_size;
    d["small"] = seg.small;
    d["expandable"] = seg.expandable;
    d["pool_id"] = py::make_tuple(seg.pool_id.first, seg.pool_id.second);
    py::list blocks;
    for (const auto& b : seg.blocks) {
      py::dict bd;
      bd["address"] = b.address;
      bd["size"] = b.size;
      bd["requested_size"] = b.requested;
      bd["allocated"] = b.allocated;
      blocks.append(bd);
    }
    d["blocks"] = blocks;
    out.append(d);
  }
  return out;
}

bool ints(PyObject* o, c10::SmallVector<int64_t, 8>& out) {
  if (!PyTuple_Check(o) && !PyList_Check(o)) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  PyObject** items = PySequence_Fast_ITEMS(o);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long v = PyLong_AsLongLong(items[i]);  // ints, or anything with __index__
    if (v == -1 && PyErr_Occurred()) throw python_error();
    out.push_back(v);
  }
  return true;
}

// empty_strided(size, stride, dtype): a buffer of the current device. Inductor's generated wrapper
// allocates every buffer this way (on CUDA through a C function of torch's own, torch._C._dynamo.guards);
// torch.empty_strided would cost a Python call, the argument parser and each active TorchFunctionMode
// (torch.set_default_device's among them) per buffer.
PyObject* empty_strided_py(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  c10::SmallVector<int64_t, 8> size, stride;
  TORCH_CHECK_TYPE(nargs == 3 && ints(args[0], size) && ints(args[1], stride) && size.size() == stride.size() &&
                       THPDtype_Check(args[2]),
                   "empty_strided(size, stride, dtype) takes a tuple of sizes, a tuple of strides as long, and a torch.dtype");
  return THPVariable_Wrap(empty_on(current_device(), size, stride, reinterpret_cast<THPDtype*>(args[2])->scalar_type));
  END_HANDLE_TH_ERRORS
}

PyMethodDef empty_strided_def = {"empty_strided", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&empty_strided_py)),
                                 METH_FASTCALL, "empty_strided(size, stride, dtype): a buffer of the current device"};

// A device index from Python, unpacked as PyTorch's bindings unpack one (THPUtils_unpackDeviceIndex,
// with its words): a value outside c10::DeviceIndex is refused, never narrowed to another device's
c10::DeviceIndex index_arg(const py::handle& o) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  TORCH_CHECK(overflow == 0 && v >= std::numeric_limits<c10::DeviceIndex>::min() &&
                  v <= std::numeric_limits<c10::DeviceIndex>::max(),
              "Overflow when unpacking DeviceIndex");
  return static_cast<c10::DeviceIndex>(v);
}

bool hooks_active() { return !is_cuda() || at::detail::getCUDAHooks().hasCUDA(); }

// The key this loaded file serves, chosen once (a second init with another key is refused: that key
// needs its own copy of the file), and every registration with torch for it, before any operator runs
void init(py::module_& m, const std::string& key) {
  static std::string chosen;
  if (!chosen.empty()) {
    TORCH_CHECK(key == chosen, "this copy of the emulated device's core serves ", chosen, ", not ", key,
                "; cudashim.emulated._build.load(\"", key, "\") loads a copy for it");
    return;
  }
  TORCH_CHECK(key == "CUDA" || key == "PrivateUse1", "the emulated device's core serves the dispatch key CUDA or "
              "PrivateUse1, not '", key, "'");
  chosen = key;
  kType = key == "CUDA" ? c10::DeviceType::CUDA : c10::DeviceType::PrivateUse1;
  kKey = key == "CUDA" ? c10::DispatchKey::CUDA : c10::DispatchKey::PrivateUse1;
  replace_torch_cuda_kernels();  // first: every registration below goes on top of these
  install_allocators();
  register_guard();
  register_hooks();
  register_sdpa();
  register_fallback();
  register_kernels();
  register_direct();
  register_amp();
  register_rnn();
  register_linalg();
  if (!is_cuda()) register_npu_sparse();
  register_sparse();
  register_cuda_only();
  register_graph();
  register_timer();
  // before finalization starts, not during it (exit.cpp)
  py::module_::import("atexit").attr("register")(py::cpp_function(&quiesce_autograd));
  m.attr("device_type") = c10::DeviceTypeName(kType, true);
}

}  // namespace
}  // namespace cudashim

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace cudashim;
  // "CUDA" or "PrivateUse1": called by _build.load before anything else
  m.def("init", [m](const std::string& key) mutable { init(m, key); });
  m.def("device_count", [] { return static_cast<int>(device_count()); });
  // every device index taken from Python goes through index_arg
  m.def("set_device_count", [](int64_t n) { set_device_count(n); });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](py::handle i) { set_current_device(index_arg(i)); });
  m.def("check_index", [](py::handle i) { return static_cast<int>(check_index(index_arg(i))); });
  m.def("stats", [](py::handle i) { return stats(index_arg(i)); });
  m.def("reset_peak", [](py::handle i) { reset_peak(index_arg(i)); });
  m.def("empty_cache", &empty_cache);
  m.def("set_memory_capacity", [](int i, int64_t bytes) { set_memory_capacity(static_cast<c10::DeviceIndex>(i), bytes); });
  m.def("memory_capacity", [](int i) { return memory_capacity(static_cast<c10::DeviceIndex>(i)); });
  m.def("untouched_bytes", &untouched_bytes);  // the devices' reservations the host has not given pages for
  m.def("set_memory_fraction", [](int i, double f) { set_memory_fraction(static_cast<c10::DeviceIndex>(i), f); });
  m.def("memory_fraction", [](int i) { return memory_fraction(static_cast<c10::DeviceIndex>(i)); });
  m.def("set_reserve_on_demand", &set_reserve_on_demand);
  m.def("host_stats", &host_stats_dict);
  m.def("set_npu_fill_uninitialized_memory", &set_npu_fill_uninitialized_memory);
  m.def("npu_fill_uninitialized_memory", &npu_fill_uninitialized_memory);
  m.def("set_memory_info", &set_memory_info, "fn(device) -> (free, total): what torch.accelerator.get_memory_info answers");
  m.def("set_memory_observer", &set_observer, "fn(device, event, bytes), or None; events: 0 allocated peak, "
        "1 largest request, 2 out of memory, 3 reserved peak");
  m.def("empty_host_cache", &empty_host_cache);
  m.def("set_host_thresholds", &set_host_thresholds);
  m.def("set_oom_rejection", &set_oom_rejection);
  m.def("oom_rejections", [](int i) { return oom_rejections(static_cast<c10::DeviceIndex>(i)); });
  m.def("reset_oom_rejections", [](int i) { reset_oom_rejections(static_cast<c10::DeviceIndex>(i)); });
  m.def("set_model_active", &set_model_active);
  m.def("model_active", &model_active);
  m.def("set_blas_workspace", &set_blas_workspace);
  m.def("clear_blas_workspaces", &clear_blas_workspaces);
  m.def("set_model_expandable", &set_model_expandable);
  m.def("model_stats", [](int i) { return model_stats_dict(static_cast<c10::DeviceIndex>(i)); });
  m.def("model_segments", [](int i) { return model_segments_list(static_cast<c10::DeviceIndex>(i)); });
  m.def("model_reset_accumulated", [](int i) { model_reset_accumulated(check_index(static_cast<c10::DeviceIndex>(i))); });
  // caching_allocator_alloc / _delete: device memory by address, counted like any block
  m.def("raw_alloc", [](int64_t n, int i) {
    return reinterpret_cast<intptr_t>(device_allocator(check_index(static_cast<c10::DeviceIndex>(i)))->raw_allocate(n));
  });
  m.def("raw_delete", [](intptr_t p) { device_allocator(-1)->raw_deallocate(reinterpret_cast<void*>(p)); });
  m.attr("empty_strided") = py::reinterpret_steal<py::object>(PyCFunction_NewEx(&empty_strided_def, nullptr, nullptr));
  m.def("pinned_bytes", &pinned_bytes);
  m.def("default_generator", [](py::handle i) { return default_generator(index_arg(i)); });
  m.def("set_philox_round_threads", &set_philox_round_threads);
  m.def("rehome", &rehome, "move a device storage's memory into a CPU (shared-memory) storage");
  m.def("host_owner", [](const at::Tensor& t) -> std::optional<at::Tensor> {
    at::Tensor h = host_owner(t);
    return h.defined() ? std::optional<at::Tensor>(h) : std::nullopt;
  });
  m.def("device_over", [](const at::Tensor& host, py::handle index) { return device_over(host, index_arg(index)); });
  m.def("cpu_view", [](const at::Tensor& t) { return cpu_view(t); }, "the CPU tensor over a device tensor's memory");
  // UntypedStorage.resize_ on a device storage (torch's own raises "built without USE_CUDA"): FSDP2
  // frees and re-allocates its unsharded parameters this way. Through the storage's own allocator.
  m.def("resize_storage", [](const at::Storage& s, int64_t nbytes) {
    TORCH_CHECK(nbytes >= 0, "resize_: the new size must be >= 0, got ", nbytes);
    at::native::resize_bytes_cpu(s.unsafeGetStorageImpl(), static_cast<size_t>(nbytes));
  });
  // the device's operator registrations that depend on data (_build.load calls it once, at once)
  m.def("register_operators", [](const std::vector<std::pair<std::string, std::string>>& synchronizing) {
    register_synchronizing(synchronizing);
    register_cpu_kernels_direct();
    register_host_composites();
  });
  m.def("sync_debug_mode", &sync_debug_mode);
  m.def("set_sync_debug_mode", &set_sync_debug_mode);
  m.def("hooks_active", &hooks_active);
  m.def("torch_cuda_kernels_replaced", &torch_cuda_kernels_replaced);
  m.def("register_collectives", &register_collectives);
  // CUDA graphs (graph.cpp; the graph itself is torch.accelerator.Graph's registered implementation)
  m.def("capture_underway", &capture_underway);
  m.def("capture_refuse", [](const std::string& what) { capture_refuse(what.c_str()); });
  m.def("capture_refuse_device", [](const std::string& what) { capture_refuse_device(what.c_str()); });
  m.def("set_stream_refusal_invalidates", &set_stream_refusal_invalidates);
  m.def("set_capture_words", &set_capture_words);
  // Stream.wait_stream(other) on stream ids of one device: a capture on `other` extends to the waiting stream
  m.def("capture_join", [](py::handle device, int64_t from, int64_t to) { capture_join(index_arg(device), from, to); });
  m.def("register_generator", &register_generator);
  // private pools (graphs/pools.cpp): torch._C's allocator-pool hooks that Inductor's CUDA graph trees call
  using Pool = c10::MempoolId_t;
  auto storage = [](intptr_t p) { return reinterpret_cast<c10::StorageImpl*>(p); };  // torch's cdata of a storage
  m.def("pool_begin_thread", [](py::handle d, Pool id) { mempool_begin_thread(index_arg(d), id); });
  m.def("pool_end_thread", [](py::handle d, Pool id) { mempool_end_thread(index_arg(d), id); });
  m.def("pool_retain", [](py::handle d, Pool id) { mempool_retain(index_arg(d), id); });
  m.def("pool_release", [](py::handle d, Pool id) { mempool_release(index_arg(d), id); });
  m.def("pool_empty_cache", [](py::handle d, Pool id) {
    if (model_active()) model_empty_pool_cache(index_arg(d), {id.first, id.second});
  });
  m.def("pool_allocated", [](py::handle d, Pool id) { return mempool_allocated(index_arg(d), id); });
  m.def("generator_graph_state", [](py::handle d) { return generator_graph_state(index_arg(d)); });
  m.def("pool_set_state", [storage](py::handle d, Pool id, const std::vector<int64_t>& allocated,
                                    const std::vector<intptr_t>& take_back) {
    std::vector<c10::StorageImpl*> s;
    for (intptr_t p : take_back) s.push_back(storage(p));
    mempool_set_state(index_arg(d), id, allocated, s);
  });
  m.def("pool_raw_delete", [](intptr_t p) { return mempool_raw_delete(reinterpret_cast<void*>(p)); });
  m.def("free_and_remove_deleter", [storage](intptr_t p) { free_and_remove_deleter(storage(p)); });
  m.def("has_standard_deleter", [storage](intptr_t p) { return has_standard_deleter(storage(p)); });
  m.def("set_storage_access_error_msg", [](const at::Tensor& t, std::string msg) {
    t.unsafeGetTensorImpl()->release_storage_and_set_meta_custom_data_ptr_error_msg_(std::move(msg));
  });
  m.def("set_storage_data_ptr_access_error_msg", [storage](intptr_t p, std::string msg) {
    storage(p)->release_data_and_set_meta_custom_data_ptr_error_msg_(std::move(msg));
  });
  // the simulated NPU's operator table (ops/npu_coverage.cpp): set once, before register_operators
  // (which kernels the device registers directly depends on it) and before the first operator runs
  m.def("set_npu_native", [](const std::vector<std::string>& names, const std::vector<std::string>& sparse) {
    set_npu_native(names, sparse);
  });
  // torch_npu's dtype checks (ops/npu_coverage.cpp): (op, [(arg index, [dtype])], before, shown arg, shown as
  // TypeMeta, after, error code) each; set with the table, before register_operators
  m.def("set_npu_dtype_checks", [](const py::list& checks, const std::vector<std::string>& whole) {
    std::vector<NpuDtypeCheck> out;
    for (const py::handle item : checks) {
      const auto t = item.cast<py::tuple>();
      TORCH_CHECK(t.size() == 7, "set_npu_dtype_checks: each check is (op, when, before, shown, meta, after, code)");
      NpuDtypeCheck c;
      c.op = t[0].cast<std::string>();
      for (const py::handle cond : t[1].cast<py::list>()) {
        const auto pair = cond.cast<py::tuple>();
        std::vector<c10::ScalarType> types;
        for (const py::handle d : pair[1].cast<py::list>()) {
          TORCH_CHECK(THPDtype_Check(d.ptr()), "set_npu_dtype_checks: a condition's dtypes are torch.dtype objects");
          types.push_back(reinterpret_cast<THPDtype*>(d.ptr())->scalar_type);
        }
        c.when.emplace_back(pair[0].cast<size_t>(), std::move(types));
      }
      c.before = t[2].cast<std::string>();
      c.shown = t[3].cast<int64_t>();
      c.meta = t[4].cast<bool>();
      c.after = t[5].cast<std::string>();
      c.code = t[6].cast<std::string>();
      out.push_back(std::move(c));
    }
    set_npu_dtype_checks(out, whole);
  });
  m.def("npu_fallback_counts", &npu_fallback_counts);
}
