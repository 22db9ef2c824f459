// attn/ladder.h
//
// attn::ladder: the FlashAttention-2 ladder, a teaching artefact beside the
// production kernels — the 16 steps ("k01_base" ... "k16_static_strides"),
// the step-7 tuning candidates ("k07/<shape>") and the tuning table that
// picks a step's candidate per GPU (attn/tuning.h). The steps run the
// seed's problem only: device pointers, head_dim 128, non-causal
// self-attention, seq_len a multiple of the kernel's block sizes.
//
// Nothing of it is in the registry (attn/attention.h) until Register() has
// run; after that its steps are listed (ListKernels, in step order) and
// they and the candidates resolve by name. In a build without CUDA its
// names are known and answer FAILED_PRECONDITION.
#ifndef ATTN_LADDER_H_
#define ATTN_LADDER_H_

namespace attn::ladder {

// Adds the ladder to the kernel registry. Thread-safe; later calls do
// nothing.
void Register();

}  // namespace attn::ladder

#endif  // ATTN_LADDER_H_
