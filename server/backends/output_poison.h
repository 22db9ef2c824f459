// server/backends/output_poison.h
//
// The byte every executor fills O and the LSE with before (or instead of)
// computing them: every bit set is NaN in fp16, bf16 and float32, so an
// element a kernel fails to write comes back as NaN instead of a stale value,
// and the transport_only measurement mode's outputs can never pass for results.
#ifndef ATTN_SERVER_OUTPUT_POISON_H_
#define ATTN_SERVER_OUTPUT_POISON_H_

namespace attn::server {

inline constexpr unsigned char kOutputPoisonByte = 0xff;

}  // namespace attn::server

#endif  // ATTN_SERVER_OUTPUT_POISON_H_
