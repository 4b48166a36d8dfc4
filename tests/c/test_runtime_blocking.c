/* TORCHNEURON_LAUNCH_BLOCKING=1 read from the real environment: every
 * launch waits for its task and returns that task's own error. */
#define _GNU_SOURCE /* setenv, usleep */
#include <stdlib.h>
#include <string.h>

#include "../../runtime/include/neuron_runtime.h"
#include "check.h"
#include "test_runtime_util.h"

int main(void) {
  setenv("TORCHNEURON_LAUNCH_BLOCKING", "1", 1);
  setenv("TORCHNEURON_HBM_SIZE", "64M", 1);
  CHECK_OK(nrt_init());
  register_test_kernels();
  nrt_stream *s = nrt_stream_default(0);
  test_log log = {0};
  log_entry e = {&log, 1};
  CHECK_OK(launch_sleep(s, 20000));
  CHECK_OK(launch_log(s, &e));
  CHECK(atomic_load(&log.n) == 1); /* ran before the launch returned */
  CHECK_OK(nrt_stream_query(s));
  nrt_task bad = {.kernel = K_FAIL, .name = "aten::index_select"};
  CHECK(nrt_launch(s, &bad) == NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error(), "aten::index_select: index 7 is out of bounds") != NULL);
  CHECK_OK(nrt_stream_synchronize(s)); /* already reported */
  int64_t counter = 0;
  CHECK_OK(launch_add(s, &counter, 2));
  CHECK(counter == 2);
  return CHECK_SUMMARY();
}
