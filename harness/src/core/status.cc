#include "capq/status.h"

namespace capq {

const char* Status::CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case Code::kNotFound:
      return "NOT_FOUND";
    case Code::kIoError:
      return "IO_ERROR";
    case Code::kUnavailable:
      return "UNAVAILABLE";
    case Code::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case Code::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case Code::kCancelled:
      return "CANCELLED";
    case Code::kUnimplemented:
      return "UNIMPLEMENTED";
    case Code::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace capq
