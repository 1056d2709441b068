// sparq::Status and sparq::StatusOr<T>: the one error type of the library.
//
// Every fallible library function returns a Status (or a StatusOr<T> that holds
// either a value or an error Status). Messages name the place that failed: the
// file, the node, the tensor, the recipe key. The library never throws across
// its public API and never aborts the process.
//
// Both types are [[nodiscard]]: ignoring a returned Status is a compiler
// warning. Where dropping one is really meant, say so: `(void)Call();`.
#pragma once

#include <cassert>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "sparq/export.h"

namespace sparq {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad input from the caller: shapes, types, values, recipe keys
  kNotSupported,     // valid input that sparq does not handle (operator, data type)
  kNotFound,         // a named thing is missing: file, tensor, input, key
  kCorruption,       // a file is malformed or truncated
  kIOError,          // the operating system refused a read or write
  kInternal,         // a bug in sparq or a library it calls
  kCancelled,        // the caller asked to stop (a progress callback set `cancel`)
};

// Returns a short name such as "InvalidArgument".
SPARQ_API const char* StatusCodeName(StatusCode code);

class [[nodiscard]] SPARQ_API Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status NotSupported(std::string msg) { return {StatusCode::kNotSupported, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {StatusCode::kCorruption, std::move(msg)}; }
  static Status IOError(std::string msg) { return {StatusCode::kIOError, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
  static Status Cancelled(std::string msg) { return {StatusCode::kCancelled, std::move(msg)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: <message>", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

namespace internal {
// Prints "sparq: StatusOr::value() called on an error: <status>" to stderr
// (see StatusOr::value()).
SPARQ_API void ReportValueOfError(const Status& status);
}  // namespace internal

// Holds a T or an error Status. Check ok() before value().
//
// value() (and *, ->) of an error is a bug in the caller. Debug builds assert.
// Release builds stay defined and do not abort: the error is printed to stderr
// and value() returns a value-initialized T (an empty Tensor, Model, vector, a
// null pointer...), so the caller's next step sees "nothing" rather than
// reading freed or uninitialized memory. (For a T with no default constructor,
// which sparq's API does not return, the process aborts with the message.)
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "StatusOr built from an OK status");
    if (status_.ok()) status_ = Status::Internal("StatusOr built from an OK status");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    if (!value_) EmplaceForError();
    return *value_;
  }
  const T& value() const& {
    if (!value_) return EmptyForError();
    return *value_;
  }
  T&& value() && {
    if (!value_) EmplaceForError();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void EmplaceForError() {
    OnValueOfError();
    if constexpr (std::is_default_constructible_v<T>) value_.emplace();
  }
  const T& EmptyForError() const {
    OnValueOfError();
    if constexpr (std::is_default_constructible_v<T>) {
      static const T* empty = new T();  // never destroyed; thread-safe initialization
      return *empty;
    } else {
      return *value_;  // not reached: OnValueOfError aborts
    }
  }
  void OnValueOfError() const {
    assert(ok() && "StatusOr::value() called on an error");
    internal::ReportValueOfError(status_);
    if constexpr (!std::is_default_constructible_v<T>) std::abort();
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace sparq

#define SPARQ_CONCAT_IMPL(a, b) a##b
#define SPARQ_CONCAT(a, b) SPARQ_CONCAT_IMPL(a, b)

// Returns from the enclosing function when `expr` yields an error Status.
#define SPARQ_RETURN_IF_ERROR(expr)                    \
  do {                                                 \
    ::sparq::Status _sparq_status = (expr);            \
    if (!_sparq_status.ok()) return _sparq_status;     \
  } while (0)

// As SPARQ_RETURN_IF_ERROR, with the error's message prefixed by `context`
// (Status::WithContext); `context` is evaluated only on an error, so a
// kernel's per-run checks build no string when they pass.
#define SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(expr, context)               \
  do {                                                                  \
    ::sparq::Status _sparq_status = (expr);                             \
    if (!_sparq_status.ok()) return _sparq_status.WithContext(context); \
  } while (0)

// `lhs = value of rexpr`, or returns its error Status. Expands to several
// statements: not usable as the body of an unbraced if/for.
#define SPARQ_ASSIGN_OR_RETURN(lhs, rexpr) \
  SPARQ_ASSIGN_OR_RETURN_IMPL(SPARQ_CONCAT(_sparq_or_, __LINE__), lhs, rexpr)
#define SPARQ_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
