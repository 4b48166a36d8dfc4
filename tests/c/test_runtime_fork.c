/* A child forked after initialisation gets a clear status from every call
 * that would wait for a worker thread it does not have (instead of
 * hanging); the parent is unaffected. */
#define _GNU_SOURCE /* setenv, usleep */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../runtime/include/neuron_runtime.h"
#include "check.h"
#include "test_runtime_util.h"

/* Runs in the child; the exit code is the number of failed expectations. */
static int child_checks(nrt_stream *s, nrt_stream *idle, void *inherited) {
  int bad = 0;
  nrt_task nop = {.kernel = NRT_KERNEL_NOP, .name = "nop"};
  bad += nrt_launch(s, &nop) != NRT_ERROR_INTERNAL;
  bad += strstr(nrt_last_error(), "forked") == NULL;
  int64_t counter = 0; /* a small kernel, which an idle stream would run inline */
  bad += launch_add(idle, &counter, 1) != NRT_ERROR_INTERNAL || counter != 0;
  bad += nrt_stream_synchronize(s) != NRT_ERROR_INTERNAL;
  bad += nrt_init() != NRT_ERROR_INTERNAL;
  void *p = (void *)1;
  bad += nrt_mem_alloc(s, 512, &p) != NRT_ERROR_INTERNAL || p != NULL;
  bad += nrt_mem_free(inherited) != NRT_ERROR_INTERNAL;
  bad += nrt_device_synchronize(0) != NRT_ERROR_INTERNAL;
  int count = -1;
  bad += nrt_device_count(&count) != NRT_ERROR_INTERNAL;
  return bad;
}

int main(void) {
  setenv("TORCHNEURON_HBM_SIZE", "64M", 1);
  CHECK_OK(nrt_init());
  register_test_kernels();
  nrt_stream *s = nrt_stream_default(0), *idle = nrt_stream_default(1);
  int64_t counter = 0;
  CHECK_OK(launch_add(s, &counter, 1));
  void *p = NULL;
  CHECK_OK(nrt_mem_alloc(s, 512, &p));
  CHECK_OK(launch_sleep(s, 20000)); /* the worker is busy when we fork */
  pid_t pid = fork();
  if (pid == 0) _exit(child_checks(s, idle, p));
  int status = -1;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_OK(launch_add(s, &counter, 1)); /* the parent carries on */
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(counter == 2);
  CHECK_OK(nrt_mem_free(p));
  return CHECK_SUMMARY();
}
