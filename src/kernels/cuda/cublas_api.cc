#include "kernels/cuda/cublas_api.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace dscale::cuda {
namespace {

// The toolkit's library folder at configure time (CMake sets it), tried where the dynamic linker's
// own search does not find the library.
#ifndef DSCALE_CUDA_LIBRARY_DIR
#define DSCALE_CUDA_LIBRARY_DIR ""
#endif

struct Loaded {
  CublasApi api;
  std::string reason;  // empty when every entry point resolved
};

// *slot = the entry point `name`; a missing one is named in *reason (the first only).
template <typename Fn>
void Resolve(void* library, const char* name, Fn* slot, std::string* reason) {
  *slot = reinterpret_cast<Fn>(dlsym(library, name));
  if (*slot == nullptr && reason->empty())
    *reason = std::string("cuBLAS has no entry point ") + name;
}

Loaded Load() {
  Loaded loaded;
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const std::string first = dlerror();
    const std::string dir = DSCALE_CUDA_LIBRARY_DIR;
    if (!dir.empty()) library = dlopen((dir + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      loaded.reason = "cannot load " + name + ": " + first;
      return loaded;
    }
  }
  // Kept open for the life of the process, as a linked library would be.
  CublasApi& api = loaded.api;
  std::string& reason = loaded.reason;
  Resolve(library, "cublasCreate_v2", &api.create, &reason);
  Resolve(library, "cublasDestroy_v2", &api.destroy, &reason);
  Resolve(library, "cublasSetStream_v2", &api.set_stream, &reason);
  Resolve(library, "cublasSetWorkspace_v2", &api.set_workspace, &reason);
  Resolve(library, "cublasSetPointerMode_v2", &api.set_pointer_mode, &reason);
  Resolve(library, "cublasSgemm_v2", &api.sgemm, &reason);
  Resolve(library, "cublasGemmEx", &api.gemm_ex, &reason);
  Resolve(library, "cublasGetStatusString", &api.status_string, &reason);
  return loaded;
}

const Loaded& Library() {
  static const Loaded loaded = Load();
  return loaded;
}

}  // namespace

const std::string& CublasUnavailableReason() { return Library().reason; }

const CublasApi& Cublas() {
  const Loaded& loaded = Library();
  if (!loaded.reason.empty()) {
    std::fprintf(stderr, "dscale: cuBLAS is not available: %s\n", loaded.reason.c_str());
    std::abort();
  }
  return loaded.api;
}

}  // namespace dscale::cuda
