// Compiles for sm_90a only: wgmma is an arch-specific instruction.
__global__ void Fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
