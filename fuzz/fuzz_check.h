// fuzz/fuzz_check.h
//
// FUZZ_CHECK(condition, format, ...): the fuzz targets' assertion. Unlike
// assert() it holds in every build type; on failure it prints the condition
// and the printf-style details, then aborts, which libFuzzer reports as a
// crash and saves the input that caused it.
#ifndef ATTN_FUZZ_FUZZ_CHECK_H_
#define ATTN_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition, ...)                                  \
  do {                                                              \
    if (!(condition)) {                                             \
      std::fprintf(stderr, "FUZZ_CHECK(%s) failed: ", #condition);  \
      std::fprintf(stderr, __VA_ARGS__);                            \
      std::fprintf(stderr, "\n");                                   \
      std::abort();                                                 \
    }                                                               \
  } while (0)

#endif  // ATTN_FUZZ_FUZZ_CHECK_H_
