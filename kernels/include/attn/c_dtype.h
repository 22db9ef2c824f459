/* attn/c_dtype.h
 *
 * The element types of attnserve's C ABIs, shared by the kernel library's
 * (attn/c_api.h, libattn_c.so) and the client's (attn/client/c_api.h,
 * libattn_client_c.so), so a caller holding one value can pass it to both.
 * The numbers are attn::DType's (attn/dtype.h) and the proto's DType minus
 * one; attn::DTypeFromC (attn/c_boundary.h) converts them.
 */
#ifndef ATTN_C_DTYPE_H_
#define ATTN_C_DTYPE_H_

enum { ATTN_DTYPE_FLOAT16 = 0, ATTN_DTYPE_BFLOAT16 = 1 };

#endif /* ATTN_C_DTYPE_H_ */
