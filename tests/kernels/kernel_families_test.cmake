# cmake -DKERNELS_DIR=<kernels/> -P kernel_families_test.cmake: the rules by
# which a kernel family gets its CUDA architectures
# (kernels/cmake/KernelFamilies.cmake), checked without configuring a build.
cmake_minimum_required(VERSION 3.24)
include(${KERNELS_DIR}/cmake/KernelFamilies.cmake)

function(expect_architectures min_cc scope given expected)
  attn_family_architectures(got ${min_cc} ${scope} "${given}")
  if(NOT got STREQUAL expected)
    message(FATAL_ERROR "family ${min_cc} ${scope} over '${given}': got '${got}', "
                        "expected '${expected}'")
  endif()
endfunction()

# portable: every listed architecture from min_cc up, suffixes kept.
expect_architectures(80 portable "80;86;90" "80;86;90")
expect_architectures(80 portable "75;80-real;90-virtual" "80-real;90-virtual")
expect_architectures(80 portable "70;75" "")
# arch_specific: exactly <min_cc>a, and only when min_cc is listed (the
# place of an sm_90a family beside the portable one).
expect_architectures(90 arch_specific "80;86;90" "90a")
expect_architectures(90 arch_specific "90-real" "90a")
expect_architectures(90 arch_specific "80;86" "")
expect_architectures(90 arch_specific "100" "")

# The real table: every family row reads, and the production family is the
# portable sm_80+ one.
set(ATTN_HAVE_CUDA ON)
set(ATTN_CUDA_ARCHITECTURES "80;86;90")
attn_read_kernel_families(${KERNELS_DIR}/src/cuda/kernel_table.inc)
if(NOT "ampere" IN_LIST ATTN_KERNEL_FAMILIES)
  message(FATAL_ERROR "kernel_table.inc has no family 'ampere': ${ATTN_KERNEL_FAMILIES}")
endif()
if(NOT ATTN_FAMILY_ampere_MIN_CC EQUAL 80 OR NOT ATTN_FAMILY_ampere_SCOPE STREQUAL "portable"
   OR NOT ATTN_FAMILY_ampere_ARCHITECTURES STREQUAL "80;86;90")
  message(FATAL_ERROR "family ampere: min_cc ${ATTN_FAMILY_ampere_MIN_CC}, scope "
                      "${ATTN_FAMILY_ampere_SCOPE}, architectures ${ATTN_FAMILY_ampere_ARCHITECTURES}")
endif()
# Without CUDA nothing is compiled for any family.
set(ATTN_HAVE_CUDA OFF)
attn_read_kernel_families(${KERNELS_DIR}/src/cuda/kernel_table.inc)
if(NOT ATTN_FAMILY_ampere_ARCHITECTURES STREQUAL "")
  message(FATAL_ERROR "without CUDA, family ampere got '${ATTN_FAMILY_ampere_ARCHITECTURES}'")
endif()
message(STATUS "kernel family rules: ok")
