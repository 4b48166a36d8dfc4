/* Tracing: one record per executed task with its name, ids and ordered
 * timestamps; a bounded ring that drops (and counts) the oldest; drains
 * in order; enabling clears, disabling keeps what was recorded. */
#define _GNU_SOURCE /* setenv, usleep */
#include <stdlib.h>
#include <string.h>

#include "../../runtime/include/neuron_runtime.h"
#include "check.h"
#include "test_runtime_util.h"

enum { CAPACITY = 16 };

static nrt_status launch_add_correlated(nrt_stream *s, int64_t *counter, uint64_t correlation) {
  nrt_task t = {.kernel = K_ADD, .name = "aten::add", .n_operands = 1, .correlation = correlation};
  t.operands[0].data = counter;
  *(int64_t *)t.params = 1;
  return nrt_launch(s, &t);
}

static void test_records(nrt_stream *s) {
  CHECK(!nrt_trace_enabled());
  nrt_trace_enable(1);
  CHECK(nrt_trace_enabled());
  int64_t counter = 0;
  uint64_t before = nrt_now_ns();
  for (int i = 0; i < 5; i++) CHECK_OK(launch_add_correlated(s, &counter, 100 + (uint64_t)i));
  nrt_task bad = {.kernel = K_FAIL, .name = "aten::gather", .correlation = 7};
  CHECK_OK(nrt_launch(s, &bad));
  CHECK(nrt_stream_synchronize(s) == NRT_ERROR_KERNEL_FAILED);
  nrt_trace_record rec[32];
  size_t got = 0;
  uint64_t dropped = 99;
  CHECK_OK(nrt_trace_drain(rec, 32, &got, &dropped));
  CHECK(got == 6 && dropped == 0);
  int sane = 1;
  for (size_t i = 0; i < got; i++) {
    sane &= rec[i].device == 1 && rec[i].stream == nrt_stream_id(s);
    sane &= before <= rec[i].enqueue_ns && rec[i].enqueue_ns <= rec[i].start_ns &&
            rec[i].start_ns <= rec[i].end_ns && rec[i].end_ns <= nrt_now_ns();
    sane &= i == 0 || rec[i - 1].end_ns <= rec[i].start_ns; /* one stream: in order */
  }
  CHECK(sane);
  int named = 1;
  for (size_t i = 0; i < 5; i++)
    named &= !strcmp(rec[i].name, "aten::add") && rec[i].kernel == K_ADD &&
             rec[i].correlation == 100 + i && !rec[i].failed;
  CHECK(named);
  CHECK(!strcmp(rec[5].name, "aten::gather") && rec[5].failed && rec[5].correlation == 7);
  CHECK_OK(nrt_trace_drain(rec, 32, &got, &dropped)); /* drained means gone */
  CHECK(got == 0 && dropped == 0);
}

static void test_overflow_and_partial_drain(nrt_stream *s) {
  int64_t counter = 0;
  for (int i = 0; i < CAPACITY + 4; i++) CHECK_OK(launch_add_correlated(s, &counter, (uint64_t)i));
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_trace_record rec[32];
  size_t got = 0;
  uint64_t dropped = 0;
  CHECK_OK(nrt_trace_drain(rec, 10, &got, &dropped)); /* oldest surviving first */
  CHECK(got == 10 && dropped == 4);
  int in_order = 1;
  for (size_t i = 0; i < got; i++) in_order &= rec[i].correlation == 4 + i;
  CHECK(in_order);
  CHECK_OK(nrt_trace_drain(rec, 32, &got, &dropped));
  CHECK(got == CAPACITY - 10 && dropped == 0); /* the count resets at each drain */
  in_order = 1;
  for (size_t i = 0; i < got; i++) in_order &= rec[i].correlation == 14 + i;
  CHECK(in_order);
  CHECK(nrt_trace_drain(NULL, 4, &got, NULL) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_trace_drain(rec, 4, NULL, NULL) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_trace_drain(NULL, 0, &got, NULL));
}

static void test_enable_disable(nrt_stream *s) {
  int64_t counter = 0;
  CHECK_OK(launch_add_correlated(s, &counter, 1));
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_trace_enable(0); /* stopping keeps the record for the drain */
  CHECK(!nrt_trace_enabled());
  CHECK_OK(launch_add_correlated(s, &counter, 2)); /* not traced */
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_trace_record rec[4];
  size_t got = 0;
  CHECK_OK(nrt_trace_drain(rec, 4, &got, NULL));
  CHECK(got == 1 && rec[0].correlation == 1);

  nrt_trace_enable(1);
  CHECK_OK(launch_add_correlated(s, &counter, 3));
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_trace_enable(1); /* enabling again starts afresh */
  CHECK_OK(nrt_trace_drain(rec, 4, &got, NULL));
  CHECK(got == 0);
  nrt_trace_enable(0);
}

int main(void) {
  setenv("TORCHNEURON_HBM_SIZE", "64M", 1);
  setenv("TORCHNEURON_TRACE_CAPACITY", "16", 1);
  CHECK_OK(nrt_init());
  register_test_kernels();
  nrt_stream *s;
  CHECK_OK(nrt_stream_from_pool(1, 0, &s));
  uint64_t t0 = nrt_now_ns(), t1 = nrt_now_ns();
  CHECK(t1 >= t0 && t0 > 0);
  test_records(s);
  test_overflow_and_partial_drain(s);
  test_enable_disable(s);
  return CHECK_SUMMARY();
}
