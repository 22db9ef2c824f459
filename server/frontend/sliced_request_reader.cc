#include "frontend/sliced_request_reader.h"

#include <string>
#include <vector>

#include "attn/sliced_message.h"

namespace attn::server {

template <typename Request>
bool SlicedRequestReader<Request>::Parse(const grpc::ByteBuffer& bytes) {
  Release();
  if (!bytes.Dump(&slices_).ok()) return false;
  // The tensors, taken as views of the slices (attn/sliced_message.h).
  static constexpr int kTensorFields[] = {Request::kQFieldNumber, Request::kKFieldNumber,
                                          Request::kVFieldNumber};
  std::vector<std::vector<absl::string_view>> pieces;
  std::string header_bytes;
  if (!wire::SplitSlicedMessage(slices_, kTensorFields, &pieces, &header_bytes)) return false;
  TensorSource* targets[] = {&q_, &k_, &v_};
  for (size_t i = 0; i < pieces.size(); ++i) {
    for (absl::string_view piece : pieces[i]) targets[i]->Append(piece);
  }
  return header_.ParseFromString(header_bytes);
}

template <typename Request>
void SlicedRequestReader<Request>::Release() {
  q_.Clear();
  k_.Clear();
  v_.Clear();
  header_.Clear();
  slices_.clear();
}

template class SlicedRequestReader<attnserve::v1::AttendRequest>;
template class SlicedRequestReader<attnserve::v1::AttendSessionsRequest>;

}  // namespace attn::server
