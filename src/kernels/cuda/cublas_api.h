#pragma once
// cuBLAS, opened with dlopen when the CUDA backend first needs it instead of being linked: a
// linked libcublas (and the libcublasLt it pulls in, ~0.5 GB of code) is mapped and initialised at
// every process start, --device cpu and `dscale --help` included, and a binary linked to it does
// not start at all on a machine without the CUDA libraries. The runtime is linked statically
// (cudart_static), which opens the driver only on the first CUDA call. So a CUDA-built dscale
// starts like a CPU-only one, and runs on the CPU where no CUDA is installed.
//
// Only the entry points the backend calls are resolved, each with the type of its declaration in
// cublas_v2.h (the _v2 names that header's macros stand for).

#include <cublas_v2.h>

#include <string>

namespace dscale::cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSetPointerMode_v2) set_pointer_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  // cublasGemmEx is overloaded in C++ (an inline wrapper for the old compute-type argument).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*,
                            cudaDataType, int, const void*, void*, cudaDataType, int,
                            cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// libcublas.so.<CUBLAS_VER_MAJOR>, from the dynamic linker's search path or else the toolkit's
// library folder this build was configured with, opened and resolved once per process. Empty when
// it loaded; otherwise why not (dlerror's words, or the entry point that is missing).
const std::string& CublasUnavailableReason();

// The resolved entry points. Aborts, naming the reason above, where cuBLAS could not be loaded:
// callers reach it only after CudaUnavailableReason() (device_available.h), which includes it,
// came back empty.
const CublasApi& Cublas();

}  // namespace dscale::cuda
