# dscale_library(NAME [OWN_UNITS] DEPS...): a static library from every .cc file in the calling
# folder (a folder is a module), with src/ as the include root. A header-only folder gives an
# INTERFACE library. The files compile a few to a unit (CMake's unity build): most include the
# JSON library or the HTTP one, whose headers then cost one parse per unit rather than one per
# file. OWN_UNITS keeps one unit per file (the SIMD kernels, whose code generation should not
# depend on which neighbours a file is batched with).
function(dscale_library name)
  cmake_parse_arguments(ARG "OWN_UNITS" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  if(sources)
    add_library(${name} STATIC ${sources})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
    if(NOT ARG_OWN_UNITS)
      set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    endif()
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  endif()
endfunction()
