// Status and Result<T>: errors cross module boundaries as values, never as exceptions.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace capq {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,     // bad input: a row, a flag, a request
    kNotFound,            // a file, a row id, an endpoint
    kIoError,             // a file could not be read or written
    kUnavailable,         // a server could not be reached or is not ready
    kFailedPrecondition,  // identity mismatch, flush refused, cache not cold
    kDeadlineExceeded,    // a deadline ran out
    kCancelled,           // interrupted by a signal or a caller
    kUnimplemented,       // a gate or adapter that does not exist yet: fails closed
    kInternal,
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return Status(Code::kInvalidArgument, std::move(msg));
  }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status IoError(std::string msg) { return Status(Code::kIoError, std::move(msg)); }
  static Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
  static Status FailedPrecondition(std::string msg) {
    return Status(Code::kFailedPrecondition, std::move(msg));
  }
  static Status DeadlineExceeded(std::string msg) {
    return Status(Code::kDeadlineExceeded, std::move(msg));
  }
  static Status Cancelled(std::string msg) { return Status(Code::kCancelled, std::move(msg)); }
  static Status Unimplemented(std::string msg) {
    return Status(Code::kUnimplemented, std::move(msg));
  }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: rows/b70/x.yaml:3:5: key 'slo' ..."
  std::string ToString() const;
  static const char* CodeName(Code code);

  // Returns a copy whose message is prefixed with `context + ": "`.
  Status WithContext(const std::string& context) const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Holds either a T or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace capq

#define CAPQ_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::capq::Status capq_status_ = (expr);        \
    if (!capq_status_.ok()) return capq_status_; \
  } while (0)
