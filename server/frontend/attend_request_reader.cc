#include "frontend/attend_request_reader.h"

#include <string>
#include <vector>

#include "attn/sliced_message.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

// The tensors, taken as views of the slices (attn/sliced_message.h).
constexpr int kTensorFields[] = {pb::AttendRequest::kQFieldNumber,
                                 pb::AttendRequest::kKFieldNumber,
                                 pb::AttendRequest::kVFieldNumber};

}  // namespace

bool AttendRequestReader::Parse(const grpc::ByteBuffer& bytes) {
  Release();
  if (!bytes.Dump(&slices_).ok()) return false;
  std::vector<std::vector<absl::string_view>> pieces;
  std::string header_bytes;
  if (!wire::SplitSlicedMessage(slices_, kTensorFields, &pieces, &header_bytes)) return false;
  TensorSource* targets[] = {&q_, &k_, &v_};
  for (size_t i = 0; i < pieces.size(); ++i) {
    for (absl::string_view piece : pieces[i]) targets[i]->Append(piece);
  }
  return header_.ParseFromString(header_bytes);
}

void AttendRequestReader::Release() {
  q_.Clear();
  k_.Clear();
  v_.Clear();
  header_.Clear();
  slices_.clear();
}

}  // namespace attn::server
