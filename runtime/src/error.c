/* error.c — status names and the per-thread message behind nrt_last_error. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[1024];

const char *nrt_status_name(nrt_status s) {
  static const char *const names[] = {
      [NRT_SUCCESS] = "NRT_SUCCESS",
      [NRT_ERROR_INVALID_ARGUMENT] = "NRT_ERROR_INVALID_ARGUMENT",
      [NRT_ERROR_INVALID_DEVICE] = "NRT_ERROR_INVALID_DEVICE",
      [NRT_ERROR_INVALID_CONFIG] = "NRT_ERROR_INVALID_CONFIG",
      [NRT_ERROR_OUT_OF_MEMORY] = "NRT_ERROR_OUT_OF_MEMORY",
      [NRT_ERROR_NOT_READY] = "NRT_ERROR_NOT_READY",
      [NRT_ERROR_KERNEL_FAILED] = "NRT_ERROR_KERNEL_FAILED",
      [NRT_ERROR_UNKNOWN_KERNEL] = "NRT_ERROR_UNKNOWN_KERNEL",
      [NRT_ERROR_INTERNAL] = "NRT_ERROR_INTERNAL",
  };
  if ((unsigned)s >= sizeof names / sizeof names[0]) return "NRT_ERROR_UNKNOWN_STATUS";
  return names[s];
}

const char *nrt_last_error(void) { return last_error; }

nrt_status nrt_fail(nrt_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return s;
}
