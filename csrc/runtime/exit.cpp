// Interpreter exit: the autograd engine's device threads must have let go of every backward first.
//
// A backward on device tensors runs on the engine's device thread ("pt_autograd_N"); the caller's
// backward() returns once the graph task is marked complete, and the device thread drops its own
// reference to the task a moment later. The task holds the caller's thread-local state, and since
// torch 2.1x that always includes a Python object (autograd.graph._engine_run_backward stashes the
// contextvars context for compiled autograd). If the device thread drops the last reference after the
// interpreter started finalizing, the decref's GIL acquisition ends the thread (pthread_exit) inside a
// noexcept destructor and the process aborts: "terminate called without an active exception" after
// the program's last line ran (pytorch/pytorch#190489: an intermittent abort at the end of
// multi-rank runs, possible on a GPU as well).
//
// quiesce_autograd(), registered with atexit (which runs before finalization), runs one tiny backward
// per device with the GIL released and no Python state in its thread-local state: a device thread
// pops the next task only after it has released the previous one, so once these backwards return
// every earlier task is gone, and the tiny ones hold nothing that needs the GIL.
#include "shim.h"

#include <Python.h>
#include <dirent.h>

#include <cstring>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/SavedTensorHooks.h>
#include <ATen/ThreadLocalPythonObjects.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/autograd.h>

namespace cudashim {
namespace {

// the engine starts its device threads at the first backward; none started: nothing to wait for
bool device_threads_started() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return true;  // cannot tell: flush anyway
  bool found = false;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    char path[96], name[32] = {0};
    std::snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    if (FILE* f = std::fopen(path, "r")) {
      if (std::fgets(name, sizeof(name), f) != nullptr && std::strncmp(name, "pt_autograd_", 12) == 0) found = true;
      std::fclose(f);
    }
    if (found) break;
  }
  closedir(dir);
  return found;
}

void tiny_backwards() {
  c10::AutoGradMode grad(true);
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    at::Tensor x = at::zeros({1}, at::TensorOptions().device(kType, d)).requires_grad_(true);
    at::Tensor y = x.mul(2);
    torch::autograd::backward({y}, {at::ones_like(y)});
  }
}

// the GIL dropped for the scope and taken back however it ends; Python's C API, not pybind11's
// gil_scoped_release, whose headers would be most of this file's compile work for one call
class GilReleased {
 public:
  GilReleased() : state_(PyEval_SaveThread()) {}
  ~GilReleased() { PyEval_RestoreThread(state_); }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* state_;
};

}  // namespace

void quiesce_autograd() {
  if (device_count() <= 0 || c10::InferenceMode::is_enabled() || capture_open() || !device_threads_started()) return;
  // the tiny tasks capture this thread's state: leave out every Python object (saved and restored
  // with the GIL held; the copies keep them alive meanwhile)
  const auto torch_function = at::impl::PythonTorchFunctionTLS::get_state();
  const auto dispatch_modes = c10::impl::TorchDispatchModeTLS::get_state();
  const auto objects = at::impl::ThreadLocalPythonObjects::get_state();
  const auto hooks = at::SavedTensorDefaultHooks::get_tls_state();
  at::impl::PythonTorchFunctionTLS::set_state(at::impl::PythonTorchFunctionTLS());
  c10::impl::TorchDispatchModeTLS::set_state(c10::impl::TorchDispatchModeTLS());
  at::impl::ThreadLocalPythonObjects::set_state(at::impl::ThreadLocalPythonObjects());
  at::SavedTensorDefaultHooks::set_tls_state(at::impl::SavedTensorDefaultHooksTLS());
  try {
    GilReleased nogil;  // a device thread may be waiting for the GIL to drop an earlier task
    tiny_backwards();
  } catch (const std::exception&) {
    // exiting anyway: a failed flush leaves the race as it was, it must not turn into an error
  }
  at::impl::PythonTorchFunctionTLS::set_state(torch_function);
  c10::impl::TorchDispatchModeTLS::set_state(dispatch_modes);
  at::impl::ThreadLocalPythonObjects::set_state(objects);
  at::SavedTensorDefaultHooks::set_tls_state(hooks);
}

}  // namespace cudashim
