/* check.h — the C tests' whole framework: CHECK records a pass or a failure
 * (with file:line) and goes on; CHECK_SUMMARY prints "N passed, N failed"
 * and gives main's exit code.  Header-only; one test file per executable. */
#ifndef NEURON_CHECK_H
#define NEURON_CHECK_H
#include <stdio.h>

static int check_passed_, check_failed_;

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (cond) {                                                            \
      check_passed_++;                                                     \
    } else {                                                               \
      check_failed_++;                                                     \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,     \
              #cond);                                                      \
    }                                                                      \
  } while (0)

/* CHECK_OK(call): the call returns NRT_SUCCESS; prints the runtime's
 * message otherwise. */
#define CHECK_OK(call)                                                     \
  do {                                                                     \
    nrt_status check_s_ = (call);                                          \
    if (check_s_ == NRT_SUCCESS) {                                         \
      check_passed_++;                                                     \
    } else {                                                               \
      check_failed_++;                                                     \
      fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #call, \
              nrt_status_name(check_s_), nrt_last_error());                \
    }                                                                      \
  } while (0)

#define CHECK_SUMMARY()                                                    \
  (printf("%s: %d passed, %d failed\n", __FILE__, check_passed_,           \
          check_failed_),                                                  \
   check_failed_ ? 1 : 0)

#endif
