// The Python face of the core: what cudashim/emulated/ needs to be torch.cuda's device module.
#include "shim.h"

#include <ATen/native/Resize.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/extension.h>
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
  return d;
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

bool hooks_active() {
#if defined(CUDASHIM_KEY_IS_CUDA)
  return at::detail::getCUDAHooks().hasCUDA();
#else
  return true;
#endif
}

}  // namespace
}  // namespace cudashim

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace cudashim;
  install_allocators();
  register_hooks();
  register_sdpa_choice();
#if defined(CUDASHIM_KEY_IS_CUDA)
  register_cpu_kernels_direct();  // the simulated NPU's, once its operator table is set (set_npu_native)
#endif
  register_host_composites();
  // before finalization starts, not during it (exit.cpp)
  py::module_::import("atexit").attr("register")(py::cpp_function(&quiesce_autograd));
  m.attr("device_type") = c10::DeviceTypeName(kType, true);
  m.def("device_count", [] { return static_cast<int>(device_count()); });
  m.def("set_device_count", [](int n) { set_device_count(static_cast<c10::DeviceIndex>(n)); });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](int i) { set_current_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("check_index", [](int i) { return static_cast<int>(check_index(static_cast<c10::DeviceIndex>(i))); });
  m.def("stats", [](int i) { return stats(static_cast<c10::DeviceIndex>(i)); });
  m.def("reset_peak", [](int i) { reset_peak(static_cast<c10::DeviceIndex>(i)); });
  m.def("empty_cache", &empty_cache);
  m.attr("empty_strided") = py::reinterpret_steal<py::object>(PyCFunction_NewEx(&empty_strided_def, nullptr, nullptr));
  m.def("pinned_bytes", &pinned_bytes);
  m.def("default_generator", [](int i) { return default_generator(static_cast<c10::DeviceIndex>(i)); });
  m.def("cpu_view", [](const at::Tensor& t) { return cpu_view(t); }, "the CPU tensor over a device tensor's memory");
  // UntypedStorage.resize_ on a device storage (torch's own raises "built without USE_CUDA"): FSDP2
  // frees and re-allocates its unsharded parameters this way. Through the storage's own allocator.
  m.def("resize_storage", [](const at::Storage& s, int64_t nbytes) {
    TORCH_CHECK(nbytes >= 0, "resize_: the new size must be >= 0, got ", nbytes);
    at::native::resize_bytes_cpu(s.unsafeGetStorageImpl(), static_cast<size_t>(nbytes));
  });
  m.def("sync_debug_mode", &sync_debug_mode);
  m.def("set_sync_debug_mode", &set_sync_debug_mode);
  m.def("hooks_active", &hooks_active);
  m.def("register_collectives", &register_collectives);
  // CUDA graphs (graph.cpp; the graph itself is torch.accelerator.Graph's registered implementation)
  m.def("capture_underway", &capture_underway);
  m.def("capture_refuse", [](const std::string& what) { capture_refuse(what.c_str()); });
  m.def("register_generator", &register_generator);
  // the simulated NPU's operator table (npu_coverage.cpp): set once, before the first operator runs
  m.def("set_npu_native", [](const std::vector<std::string>& names, const std::vector<std::string>& sparse) {
    set_npu_native(names, sparse);
    register_cpu_kernels_direct();
  });
  m.def("npu_fallback_counts", &npu_fallback_counts);
}
