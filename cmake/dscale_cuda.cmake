# Resolves DSCALE_CUDA into DSCALE_HAVE_CUDA and, when the backend is on, enables the CUDA
# language for it:
#   OFF   never builds the CUDA backend;
#   ON    requires a working nvcc and fails the configure without one;
#   AUTO  builds it where nvcc works (on PATH, named by CUDACXX, or at /usr/local/cuda/bin) and
#         otherwise carries on without it, saying so in one status line.
# Device code is compiled for sm_90a (Hopper, with its architecture-specific instructions) and
# sm_80 (Ampere) unless CMAKE_CUDA_ARCHITECTURES says otherwise.

set(DSCALE_HAVE_CUDA OFF)
string(TOUPPER "${DSCALE_CUDA}" _dscale_cuda_mode)
if(_dscale_cuda_mode STREQUAL "AUTO")
  set(_dscale_cuda_required OFF)
elseif(DSCALE_CUDA)
  set(_dscale_cuda_required ON)
else()
  message(STATUS "dscale: CUDA backend off (DSCALE_CUDA=${DSCALE_CUDA})")
  return()
endif()

# The toolkit's usual home is often not on PATH; the compiler check below finds nvcc through
# CUDACXX, which its child configure inherits.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(_dscale_nvcc nvcc NO_CACHE)
  if(NOT _dscale_nvcc AND EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
endif()

include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  if(_dscale_cuda_required)
    message(FATAL_ERROR "DSCALE_CUDA=ON but no working CUDA compiler was found: put nvcc on "
                        "PATH, set CUDACXX, or pass -DCMAKE_CUDA_COMPILER=/path/to/nvcc "
                        "(after a failed search, start from a fresh build folder)")
  endif()
  message(STATUS "dscale: no CUDA compiler found; building without the CUDA backend")
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "90a;80")
endif()
enable_language(CUDA)

# CMake before 3.26 knows nvcc's -std flags only up to C++17, although nvcc 12 and later accept
# -std=c++20 (with GCC 10 or newer as the host compiler).
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND
   CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
if(DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA_STANDARD 20)
else()
  set(CMAKE_CUDA_STANDARD 17)
endif()
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)

find_package(CUDAToolkit)
if(NOT TARGET CUDA::cudart_static OR NOT TARGET CUDA::cublas)
  if(_dscale_cuda_required)
    message(FATAL_ERROR "DSCALE_CUDA=ON but the CUDA toolkit's runtime or cuBLAS was not found")
  endif()
  message(STATUS "dscale: nvcc found but not the CUDA runtime and cuBLAS; building without the "
                 "CUDA backend")
  return()
endif()

# Warnings of the device front end and of the host compiler on the host half of .cu files.
add_compile_options(
  "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-Wno-missing-field-initializers>")
if(DSCALE_WERROR)
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>"
                      "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>")
endif()

set(DSCALE_HAVE_CUDA ON)
message(STATUS "dscale: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
               "${CMAKE_CUDA_ARCHITECTURES}, C++${CMAKE_CUDA_STANDARD})")
