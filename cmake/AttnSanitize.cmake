# Sanitizer and fuzzing builds of the CPU parts (kernels' CPU code, proto,
# server, clients, tests): deploy/scripts/sanitizer_checks.sh runs them (test.sh, so CI).
#
#   -DATTN_SANITIZE=address,undefined   ASan + UBSan; UBSan aborts on its
#                                       first finding (-fno-sanitize-recover=all)
#                                       so a finding fails the test
#   -DATTN_SANITIZE=thread              TSan (see tests/sanitizers/README.md
#                                       for how it sees Debian's Abseil locks)
#   -DATTN_FUZZ=ON                      also the libFuzzer targets in fuzz/
#                                       (clang; needs ATTN_SANITIZE=address,undefined;
#                                       fuzz/CMakeLists.txt gives the code they
#                                       fuzz libFuzzer's coverage instrumentation)
#
# Both need a CUDA-off build (-DATTN_ENABLE_CUDA=OFF): nvcc code is not
# instrumented. The libraries from the distribution (gRPC, protobuf, Abseil,
# libstdc++) are not instrumented either; tests/sanitizers/ holds the
# suppressions that follows from, each with its reason.
set(ATTN_SANITIZE "" CACHE STRING
    "Sanitizers for the CPU parts: empty (none), address,undefined or thread")
set_property(CACHE ATTN_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")
option(ATTN_FUZZ "Build the libFuzzer targets in fuzz/ (clang, ATTN_SANITIZE=address,undefined)" OFF)

set(ATTN_SANITIZER_DIR ${PROJECT_SOURCE_DIR}/tests/sanitizers)

if(ATTN_SANITIZE STREQUAL "")
  if(ATTN_FUZZ)
    message(FATAL_ERROR "ATTN_FUZZ=ON needs -DATTN_SANITIZE=address,undefined")
  endif()
  return()
endif()

if(NOT ATTN_SANITIZE MATCHES "^(address,undefined|thread)$")
  message(FATAL_ERROR "ATTN_SANITIZE is '${ATTN_SANITIZE}'; use address,undefined or thread")
endif()
if(ATTN_HAVE_CUDA)
  message(FATAL_ERROR "ATTN_SANITIZE=${ATTN_SANITIZE} instruments the CPU parts only; "
                      "configure with -DATTN_ENABLE_CUDA=OFF")
endif()
if(ATTN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ATTN_FUZZ=ON needs clang (libFuzzer): "
                        "configure with -DCMAKE_CXX_COMPILER=clang++-14")
  endif()
  if(NOT ATTN_SANITIZE STREQUAL "address,undefined")
    message(FATAL_ERROR "ATTN_FUZZ=ON needs -DATTN_SANITIZE=address,undefined")
  endif()
  if(NOT ATTN_BUILD_SERVICE)
    message(FATAL_ERROR "ATTN_FUZZ=ON needs ATTN_BUILD_SERVICE=ON (the targets fuzz the service)")
  endif()
endif()

# Frame pointers and line tables: readable stacks at a small cost in build time.
set(attn_sanitize_flags -fsanitize=${ATTN_SANITIZE} -fno-omit-frame-pointer)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  list(APPEND attn_sanitize_flags -gline-tables-only)
else()
  list(APPEND attn_sanitize_flags -g1)
endif()
if(ATTN_SANITIZE MATCHES "undefined")
  list(APPEND attn_sanitize_flags -fno-sanitize-recover=all)
endif()
add_compile_options(${attn_sanitize_flags})
add_link_options(-fsanitize=${ATTN_SANITIZE})
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # Link only the shared libraries a binary uses, as Debian's GCC does by
  # default: server_security_test has its own reflection stubs, and a
  # libgrpc++_reflection.so loaded beside them (attn_server_lib links it)
  # registers the same proto twice and aborts.
  add_link_options(-Wl,--as-needed)
endif()

# TSan: every executable gets the annotations that show it Abseil's locks
# (tests/sanitizers/absl_sync_tsan_annotations.cc says why and how), added
# once the whole tree is defined.
if(ATTN_SANITIZE STREQUAL "thread")
  add_library(attn_absl_sync_tsan_annotations OBJECT
              ${ATTN_SANITIZER_DIR}/absl_sync_tsan_annotations.cc)
  target_link_libraries(attn_absl_sync_tsan_annotations PRIVATE absl::synchronization)

  function(attn_add_tsan_annotations_to_executables dir)
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(type STREQUAL "EXECUTABLE")
        target_sources(${target} PRIVATE $<TARGET_OBJECTS:attn_absl_sync_tsan_annotations>)
        target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS})
      endif()
    endforeach()
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    foreach(subdir IN LISTS subdirs)
      attn_add_tsan_annotations_to_executables(${subdir})
    endforeach()
  endfunction()
  cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR}
                 CALL attn_add_tsan_annotations_to_executables ${PROJECT_SOURCE_DIR})
endif()

message(STATUS "Sanitizers: ${ATTN_SANITIZE}; libFuzzer targets: ${ATTN_FUZZ}")
