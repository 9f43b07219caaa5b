// A CUDA build of torch: its CUDA backend's kernels give way to the device's.
//
// libtorch_cuda registers a kernel for the CUDA key (and CUDA's sparse, quantized and nested keys) of
// nearly every operator while torch loads, before this library can. Those kernels launch on a GPU
// through a driver the emulated device does not have, and an operator that has one never reaches the
// device's fallback. So each such kernel is replaced, before the device registers its own, by what a
// CPU build's dispatch table would hold in that slot: the operator's composite kernel
// (CompositeExplicitAutogradNonFunctional, CompositeExplicitAutograd, then CompositeImplicitAutograd,
// the dispatcher's own order), else the key's fallback (the device's, or CPU torch's "could not run"
// error where the device has none). The device's own registrations then go on top, as on a CPU build,
// and a table that asks "has the device a kernel for this" does not count the replaced ones.
//
// Kernels every build of torch registers for the CUDA key stay: c10d's device-generic collectives
// (collectives.cpp replaces them on both builds) and those registered from Python (torch._native's),
// except where such a Python kernel lies over one of torch's CUDA backend: it calls that kernel.
// Decided by probing: torch's CUDA backend is there when its CUDA hooks are (hooks.cpp, before it
// replaces them); on a CPU build nothing here runs.
#include "call.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/util/Exception.h>

#include <typeinfo>

#include <memory>
#include <unordered_set>
#include <vector>

namespace cudashim {
namespace {

// the keys whose kernels torch's CUDA backend registers, and that a CPU build leaves empty
constexpr c10::DispatchKey kTorchCudaKeys[] = {c10::DispatchKey::CUDA, c10::DispatchKey::SparseCUDA,
                                               c10::DispatchKey::SparseCsrCUDA, c10::DispatchKey::QuantizedCUDA,
                                               c10::DispatchKey::NestedTensorCUDA};

struct Replaced {
  c10::OperatorName name;
  c10::DispatchKey key;
};

std::vector<Replaced>& replaced() {
  static std::vector<Replaced> r;
  return r;
}

std::unordered_set<std::string>& replaced_index() {  // "name.overload/key", for torch_cuda_kernel()
  static std::unordered_set<std::string> r;
  return r;
}

std::string index_of(const c10::OperatorName& name, c10::DispatchKey key) {
  return name.name + "." + name.overload_name + "/" + std::to_string(static_cast<int>(key));
}

template <c10::DispatchKey Composite>
void composite(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  op.callBoxedForDispatchKey(Composite, *stack);
}

template <c10::DispatchKey Key>
void not_here(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "Could not run '", op.schema().name(), "' with arguments from the '", Key,
                              "' backend: the emulated CUDA device has no kernel for it (a CPU build of torch has none "
                              "either)");
}

// what a CPU build's table holds in `key`'s slot of `op`, once torch's CUDA kernel is gone
template <c10::DispatchKey Key>
torch::CppFunction stand_in(const c10::OperatorHandle& op) {
  using K = c10::DispatchKey;
  if (op.hasKernelForDispatchKey(K::CompositeExplicitAutogradNonFunctional) && Key != K::NestedTensorCUDA) {
    return torch::CppFunction::makeFromBoxedFunction<&composite<K::CompositeExplicitAutogradNonFunctional>>();
  }
  if (op.hasKernelForDispatchKey(K::CompositeExplicitAutograd)) {
    return torch::CppFunction::makeFromBoxedFunction<&composite<K::CompositeExplicitAutograd>>();
  }
  if (op.hasKernelForDispatchKey(K::CompositeImplicitAutograd)) {
    return torch::CppFunction::makeFromBoxedFunction<&composite<K::CompositeImplicitAutograd>>();
  }
  if constexpr (Key == K::CUDA || Key == K::SparseCUDA || Key == K::SparseCsrCUDA) {
    return torch::CppFunction::makeFromBoxedFunction<&fallback>();  // the keys the device serves (sparse.cpp)
  } else {
    return torch::CppFunction::makeFromBoxedFunction<&not_here<Key>>();
  }
}

// the file the active kernel of `key` was registered from (the dispatcher's state names it), or ""
std::string registered_from(const c10::OperatorHandle& op, c10::DispatchKey key) {
  const std::string state = op.dumpState();
  const std::string line = "\n" + std::string(c10::toString(key)) + ": registered at ";
  const auto at = state.find(line);
  if (at == std::string::npos) return "";
  const auto begin = at + line.size();
  const auto colon = state.find(':', begin);
  return state.substr(begin, colon == std::string::npos ? std::string::npos : colon - begin);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// a kernel a CPU build registers too
bool every_build(const std::string& file) {
  return ends_with(file, ".py") || ends_with(file, "/c10d/Ops.cpp");
}

// torch's CUDA backend registered a kernel in `key`'s slot of `op`, whether it is the active one or lies
// under a Python override: torch._native's routers sit on top of the CUDA kernel and call it (the kernel
// they captured when torch loaded) for every input their own accelerated path declines, so the slot
// needs the stand-in as much as one whose active kernel is torch's
bool torch_cuda_registered(const c10::OperatorHandle& op, c10::DispatchKey key) {
  const std::string state = op.dumpState();
  const std::string name(c10::toString(key));
  for (const std::string& head : {"\n" + name + ": registered at ", "\n" + name + " (inactive): registered at "}) {
    for (auto at = state.find(head); at != std::string::npos; at = state.find(head, at + 1)) {
      const auto begin = at + head.size();
      const auto colon = state.find(':', begin);
      if (!every_build(state.substr(begin, colon == std::string::npos ? std::string::npos : colon - begin))) {
        return true;
      }
    }
  }
  return false;
}

struct Mute final : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

template <c10::DispatchKey Key>
void replace_for(std::vector<std::unique_ptr<torch::Library>>& libs) {
  auto& dispatcher = c10::Dispatcher::singleton();
  std::unordered_map<std::string, torch::Library*> by_ns;
  for (const auto& name : dispatcher.getAllOpNames()) {
    auto h = dispatcher.findOp(name);
    if (!h || !h->hasSchema() || !h->hasKernelForDispatchKey(Key) || !torch_cuda_registered(*h, Key)) continue;
    const auto sep = name.name.find("::");
    if (sep == std::string::npos) continue;
    const std::string ns = name.name.substr(0, sep);
    auto& lib = by_ns[ns];
    if (lib == nullptr) {
      libs.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, ns, Key, __FILE__, __LINE__));
      lib = libs.back().get();
    }
    const std::string op = name.name.substr(sep + 2) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib->impl(op.c_str(), stand_in<Key>(*h));
    replaced().push_back({name, Key});
    replaced_index().insert(index_of(name, Key));
  }
}

// Composite kernels that call a DispatchStub themselves: the stub picks its kernel by the tensors' device
// type, so on a CUDA build the composite reaches torch's CUDA kernel without passing the CUDA key, and no
// slot above names it (the dispatcher cannot list these; the op_db sweep on a CUDA build finds them). The
// device's fallback takes the CUDA slot: the CPU's composite, whose stub is the CPU's.
constexpr const char* kStubCallers[] = {"aten::ldexp.Tensor", "aten::ldexp.out", "aten::ldexp_"};

void replace_stub_callers(std::vector<std::unique_ptr<torch::Library>>& libs) {
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const char* qualified : kStubCallers) {
    const std::string full(qualified);
    const auto sep = full.find("::"), dot = full.find('.');
    const std::string name = full.substr(0, dot), overload = dot == std::string::npos ? "" : full.substr(dot + 1);
    auto h = dispatcher.findOp({name, overload});
    if (!h || !h->hasSchema() || h->hasKernelForDispatchKey(c10::DispatchKey::CUDA) ||
        !h->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
      continue;  // another release's operator, or one whose CUDA slot replace_for already took
    }
    libs.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, full.substr(0, sep), c10::DispatchKey::CUDA,
                                                    __FILE__, __LINE__));
    libs.back()->impl(full.substr(sep + 2).c_str(), torch::CppFunction::makeFromBoxedFunction<&fallback>());
    replaced().push_back({h->operator_name(), c10::DispatchKey::CUDA});
    replaced_index().insert(index_of(h->operator_name(), c10::DispatchKey::CUDA));
  }
}

}  // namespace

int64_t replace_torch_cuda_kernels() {
  // PrivateUse1 has no kernels of torch's own; a CPU build's CUDA hooks are the interface's stub
  if (!is_cuda() || typeid(at::detail::getCUDAHooks()) == typeid(at::CUDAHooksInterface)) return 0;
  static std::vector<std::unique_ptr<torch::Library>> libs;
  if (!libs.empty() || !replaced().empty()) return static_cast<int64_t>(replaced().size());
  static Mute mute;
  c10::WarningUtils::WarningHandlerGuard quiet(&mute);  // "Overriding a previously registered kernel", once per key
  replace_for<c10::DispatchKey::CUDA>(libs);
  replace_for<c10::DispatchKey::SparseCUDA>(libs);
  replace_for<c10::DispatchKey::SparseCsrCUDA>(libs);
  replace_for<c10::DispatchKey::QuantizedCUDA>(libs);
  replace_for<c10::DispatchKey::NestedTensorCUDA>(libs);
  replace_stub_callers(libs);
  static_assert(sizeof(kTorchCudaKeys) / sizeof(kTorchCudaKeys[0]) == 5, "one replace_for per key above");
  return static_cast<int64_t>(replaced().size());
}

bool torch_cuda_kernel(const c10::OperatorName& name, c10::DispatchKey key) {
  return !replaced_index().empty() && replaced_index().count(index_of(name, key)) != 0;
}

// A replaced slot may have been taken since by a kernel of the device's own (registered after the
// stand-in, so the one that runs): the dispatcher's state names the file each active kernel was
// registered from, and the stand-ins' is this one. Asked only for the operators torch had kernels for.
bool device_has_kernel(const c10::OperatorHandle& op, c10::DispatchKey key) {
  if (!op.hasKernelForDispatchKey(key)) return false;
  return !torch_cuda_kernel(op.operator_name(), key) || registered_from(op, key) != __FILE__;
}

int64_t torch_cuda_kernels_replaced() { return static_cast<int64_t>(replaced().size()); }

}  // namespace cudashim
