#include "large_allocations.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace attn::tools {

void KeepLargeAllocationsInTheHeap() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // never give the heap's top back
#endif
}

}  // namespace attn::tools
