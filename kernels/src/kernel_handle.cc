// KernelHandle (attn/attention.h): Run checks, then launches; Launch only
// launches.
#include "attn/attention.h"
#include "attn/validate.h"

namespace attn {

absl::Status KernelHandle::Run(const AttentionArgs& args, CUstream_st* stream) const {
  if (absl::Status st = ValidateArgs(args, info_); !st.ok()) return st;
  if (absl::Status st = ValidateWorkspace(args, info_); !st.ok()) return st;
  if (entry_.check != nullptr) {
    if (absl::Status st = entry_.check(impl_, info_, args); !st.ok()) return st;
  }
  return Launch(args, stream);
}

absl::Status KernelHandle::Launch(const AttentionArgs& args, CUstream_st* stream) const {
  return entry_.launch(impl_, info_, args, stream);
}

int64_t KernelHandle::WorkspaceBytes(const AttentionProblem& problem) const {
  return entry_.workspace_bytes == nullptr ? 0 : entry_.workspace_bytes(impl_, problem);
}

int64_t KernelHandle::MaxWorkspaceBytes() const {
  return entry_.max_workspace_bytes == nullptr ? 0 : entry_.max_workspace_bytes(impl_);
}

}  // namespace attn
