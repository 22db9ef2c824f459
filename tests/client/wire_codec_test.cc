// The zero-copy request encoding and the hand-written health messages must
// be byte-compatible with what protobuf itself produces and parses.
#include <memory>
#include <string>

#include "attn/client/attend_types.h"
#include "attnserve/v1/attention.pb.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "gtest/gtest.h"
#include "health_codec.h"
#include "wire_codec.h"

namespace attn::internal {
namespace {

namespace pb = ::attnserve::v1;

std::string Flatten(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  EXPECT_TRUE(buffer.DumpToSingleSlice(&slice).ok());
  return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
}

TEST(WireCodecTest, EncodedRequestParsesAsTheFullMessage) {
  auto inputs = std::make_shared<const AttentionInputs>(
      MakeRandomInputs({2, 37, 3, 24}, DType::kBFloat16, 42));  // > 127-byte varint lengths
  AttendOptions options;
  options.kernel = "k07_autotuned";
  options.request_id = "req-1";
  options.softmax_scale = 0.25f;
  const pb::AttendRequest header = MakeRequestHeader(*inputs, options);
  const grpc::ByteBuffer buffer = EncodeAttendRequest(header, inputs);

  pb::AttendRequest full = header;
  full.set_q(inputs->q);
  full.set_k(inputs->k);
  full.set_v(inputs->v);
  EXPECT_EQ(static_cast<int64_t>(buffer.Length()), EncodedRequestBytes(header, inputs->TensorBytes()));
  EXPECT_EQ(buffer.Length(), full.ByteSizeLong());

  pb::AttendRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
  EXPECT_EQ(parsed.SerializeAsString(), full.SerializeAsString());
  EXPECT_EQ(parsed.dtype(), pb::DTYPE_BFLOAT16);
  EXPECT_EQ(parsed.shape().seq_len(), 37);
  EXPECT_FLOAT_EQ(parsed.softmax_scale(), 0.25f);
  EXPECT_FALSE(MakeRequestHeader(*inputs, AttendOptions()).has_softmax_scale());
}

TEST(WireCodecTest, TensorSlicesReferenceTheInputsUntilReleased) {
  auto inputs =
      std::make_shared<const AttentionInputs>(MakeRandomInputs({1, 4, 1, 8}, DType::kFloat16, 1));
  {
    const grpc::ByteBuffer buffer = EncodeAttendRequest(MakeRequestHeader(*inputs, {}), inputs);
    EXPECT_EQ(inputs.use_count(), 4);  // ours plus one per tensor slice
  }
  EXPECT_EQ(inputs.use_count(), 1);
}

TEST(WireCodecTest, ResponseMustMatchTheRequest) {
  const AttentionInputs inputs = MakeRandomInputs({1, 4, 1, 8}, DType::kFloat16, 1);
  pb::AttendResponse response;
  response.set_dtype(pb::DTYPE_FLOAT16);
  *response.mutable_shape() = ToProto(inputs.shape);
  response.set_out(std::string(static_cast<size_t>(inputs.TensorBytes()), '\0'));
  response.mutable_timing()->set_kernel_ns(5);
  response.set_kernel("cpu_reference");
  AttendResult result;
  pb::AttendResponse copy = response;
  ASSERT_TRUE(TakeResponse(copy, inputs, &result).ok());
  EXPECT_EQ(result.out.size(), static_cast<size_t>(inputs.TensorBytes()));
  EXPECT_EQ(result.server.kernel_ns, 5);
  EXPECT_EQ(result.kernel, "cpu_reference");

  copy = response;
  copy.set_dtype(pb::DTYPE_BFLOAT16);
  EXPECT_EQ(TakeResponse(copy, inputs, &result).code(), absl::StatusCode::kInternal);
  copy = response;
  copy.mutable_shape()->set_seq_len(5);
  EXPECT_EQ(TakeResponse(copy, inputs, &result).code(), absl::StatusCode::kInternal);
  copy = response;
  copy.mutable_out()->pop_back();
  EXPECT_EQ(TakeResponse(copy, inputs, &result).code(), absl::StatusCode::kInternal);
}

TEST(HealthCodecTest, RequestEncoding) {
  EXPECT_EQ(EncodeHealthCheckRequest(""), "");
  EXPECT_EQ(EncodeHealthCheckRequest("attnserve.v1.Attention"),
            std::string("\x0a\x16") + "attnserve.v1.Attention");
}

TEST(HealthCodecTest, ResponseDecoding) {
  EXPECT_EQ(*DecodeHealthCheckResponse(""), 0);
  EXPECT_EQ(*DecodeHealthCheckResponse(std::string("\x08\x01", 2)), 1);
  EXPECT_EQ(*DecodeHealthCheckResponse(std::string("\x08\x02", 2)), 2);
  // Unknown fields of every wire type are skipped.
  const std::string with_unknown = std::string("\x12\x03xyz", 5) + std::string("\x18\x96\x01", 3) +
                                   std::string("\x25\x00\x00\x00\x00", 5) +
                                   std::string("\x29", 1) + std::string(8, '\0') +
                                   std::string("\x08\x01", 2);
  EXPECT_EQ(*DecodeHealthCheckResponse(with_unknown), 1);
  EXPECT_FALSE(DecodeHealthCheckResponse(std::string("\x08", 1)).ok());
  EXPECT_FALSE(DecodeHealthCheckResponse(std::string("\x12\x05xy", 4)).ok());
  EXPECT_FALSE(DecodeHealthCheckResponse(std::string("\x0f", 1)).ok());
}

}  // namespace
}  // namespace attn::internal
