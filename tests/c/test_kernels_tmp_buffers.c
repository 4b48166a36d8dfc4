/* The per-thread cache of kernel work buffers (common/tmp_buffers.h):
 * alignment, reuse of a freed block by the next request that fits (the
 * smallest that fits), calloc's zeroes on a reused dirty block, overflow,
 * blocks too large to cache, the cache's bound, and a thread's cache freed
 * when it exits (under `make sanitize`, LeakSanitizer fails a leak). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "common/tmp_buffers.h"

static void test_reuse(void) {
  char *a = nk_tmp_malloc(1000);
  CHECK(a && (uintptr_t)a % 64 == 0);
  memset(a, 0xAB, 1000);
  nk_tmp_free(a);
  char *b = nk_tmp_malloc(900); /* fits the cached block: the same memory */
  CHECK(b == a);
  nk_tmp_free(b);
  char *z = nk_tmp_calloc(10, 100); /* the same dirty block, zeroed */
  CHECK(z == a);
  int zero = 1;
  for (int i = 0; i < 1000; i++) zero &= z[i] == 0;
  CHECK(zero);
  nk_tmp_free(z);
}

static void test_smallest_fit(void) {
  char *big = nk_tmp_malloc(1 << 20), *small = nk_tmp_malloc(4096);
  nk_tmp_free(big);
  nk_tmp_free(small);
  char *p = nk_tmp_malloc(2000);
  CHECK(p == small);
  char *q = nk_tmp_malloc(3000); /* small is taken: the big one */
  CHECK(q == big);
  char *r = nk_tmp_malloc(5000); /* nothing cached fits: new memory */
  CHECK(r && r != big && r != small);
  nk_tmp_free(p);
  nk_tmp_free(q);
  nk_tmp_free(r);
}

static void test_limits(void) {
  CHECK(nk_tmp_malloc(SIZE_MAX - 8) == NULL);
  CHECK(nk_tmp_calloc(SIZE_MAX / 2, 4) == NULL);
  nk_tmp_free(NULL);
  /* larger than the whole cache: freed, not kept */
  char *huge = nk_tmp_malloc((size_t)80 << 20);
  CHECK(huge != NULL);
  nk_tmp_free(huge);
  /* more blocks than the cache holds: each later request still works */
  char *p[12];
  for (int i = 0; i < 12; i++) p[i] = nk_tmp_malloc((size_t)(i + 1) << 16);
  int ok = 1;
  for (int i = 0; i < 12; i++) ok &= p[i] != NULL;
  CHECK(ok);
  for (int i = 0; i < 12; i++) nk_tmp_free(p[i]);
  for (int i = 0; i < 12; i++) p[i] = nk_tmp_malloc((size_t)(12 - i) << 16);
  ok = 1;
  for (int i = 0; i < 12; i++) {
    ok &= p[i] != NULL;
    memset(p[i], 1, (size_t)(12 - i) << 16); /* writable to the end (ASan) */
  }
  CHECK(ok);
  for (int i = 0; i < 12; i++) nk_tmp_free(p[i]);
}

static void *thread_body(void *arg) {
  (void)arg;
  for (int i = 0; i < 4; i++) nk_tmp_free(nk_tmp_malloc((size_t)(i + 1) << 18));
  return NULL; /* its cache is freed here (a leak otherwise) */
}

static void test_thread_exit(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, thread_body, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
}

int main(void) {
  test_reuse();
  test_smallest_fit();
  test_limits();
  test_thread_exit();
  return CHECK_SUMMARY();
}
