/* Configuration parsing: strict, every bad value rejected with a message
 * naming the variable; a failed initialisation reports the same error to
 * every later call. */
#define _GNU_SOURCE /* setenv */
#include <stdlib.h>
#include <string.h>

#include "../../runtime/src/internal.h"
#include "check.h"

static const char *const VARS[] = {"TORCHNEURON_DEVICE_COUNT", "TORCHNEURON_HBM_SIZE",
                                   "TORCHNEURON_NUM_THREADS", "TORCHNEURON_LAUNCH_BLOCKING",
                                   "TORCHNEURON_TRACE_CAPACITY", "NEURON_RT_VISIBLE_CORES",
                                   "LOCAL_RANK", "TORCHNEURON_PIN_THREADS"};

static void clear_env(void) {
  for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) unsetenv(VARS[i]);
}

static void test_parse_size(void) {
  static const struct { const char *text; uint64_t want; } good[] = {
      {"1024", 1024}, {"0", 0}, {"16G", (uint64_t)16 << 30}, {"64m", (uint64_t)64 << 20},
      {"2T", (uint64_t)2 << 40}, {"8GB", (uint64_t)8 << 30}, {"3k", 3072}, {"7b", 7},
      {"16777215T", (uint64_t)16777215 << 40}, /* largest that fits in 64 bits */
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    uint64_t v = 12345;
    CHECK(nrt_parse_size(good[i].text, &v) == 0 && v == good[i].want);
  }
  static const char *const bad[] = {"", "G", "-1", "+1", " 1", "1 ", "12X", "1 G", "1GG",
                                    "1.5G", "0x10", "99999999999999999999", "16777216T",
                                    "18446744073709551616"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t v = 12345;
    CHECK(nrt_parse_size(bad[i], &v) == -1 && v == 12345);
  }
  CHECK(nrt_parse_size(NULL, &(uint64_t){0}) == -1);
}

static void test_parse_int(void) {
  long n = 0;
  CHECK(nrt_parse_int("4", 1, 64, &n) == 0 && n == 4);
  CHECK(nrt_parse_int("64", 1, 64, &n) == 0 && n == 64);
  CHECK(nrt_parse_int("-1", -1, 0, &n) == 0 && n == -1);
  static const char *const bad[] = {"0", "65", "4x", "", " 4", "+4", "4 ", "-", "0x4",
                                    "99999999999999999999999", "-99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    n = 777;
    CHECK(nrt_parse_int(bad[i], 1, 64, &n) == -1 && n == 777);
  }
}

static void test_parse_core_list(void) {
  CHECK(nrt_parse_core_list("0", 2) == 1);
  CHECK(nrt_parse_core_list("1", 2) == 1);
  CHECK(nrt_parse_core_list("0-3", 4) == 4);
  CHECK(nrt_parse_core_list("0,2-3,5", 8) == 4);
  CHECK(nrt_parse_core_list("63", 64) == 1);
  static const char *bad[] = {"", ",", "0,", ",0", "2", "0-2", "1-0", "0,0", "0-1,1",
                              "-1", "a", "0-", "-", "1 ", "0;1", "00000000000000000000000000000000001"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK(nrt_parse_core_list(bad[i], 2) == -1);
}

/* value of `name` makes the configuration invalid, naming the variable */
static void check_rejected(const char *name, const char *value) {
  nrt_config cfg;
  clear_env();
  setenv(name, value, 1);
  CHECK(nrt_config_from_env(&cfg) == NRT_ERROR_INVALID_CONFIG);
  CHECK(strstr(nrt_last_error(), name) != NULL);
  CHECK(strstr(nrt_last_error(), value) != NULL);
}

static void test_config(void) {
  nrt_config cfg;
  clear_env();
  CHECK_OK(nrt_config_from_env(&cfg));
  CHECK(cfg.device_count == 2 && cfg.hbm_bytes == (uint64_t)16 << 30);
  CHECK(cfg.num_threads >= 1 && cfg.launch_blocking == 0 && cfg.trace_capacity == 65536);
  CHECK(cfg.pin_threads == 0);

  setenv("TORCHNEURON_DEVICE_COUNT", "3", 1);
  setenv("TORCHNEURON_HBM_SIZE", "256M", 1);
  setenv("TORCHNEURON_NUM_THREADS", "7", 1);
  setenv("TORCHNEURON_LAUNCH_BLOCKING", "1", 1);
  setenv("TORCHNEURON_TRACE_CAPACITY", "16", 1);
  setenv("TORCHNEURON_PIN_THREADS", "1", 1);
  CHECK_OK(nrt_config_from_env(&cfg));
  CHECK(cfg.pin_threads == 1);
  CHECK(cfg.device_count == 3 && cfg.hbm_bytes == (uint64_t)256 << 20);
  CHECK(cfg.num_threads == 7 && cfg.launch_blocking == 1 && cfg.trace_capacity == 16);

  /* a launcher's variables: visible cores renumber from 0, LOCAL_RANK picks
   * the first device modulo the count */
  CHECK(cfg.first_device == 0);
  setenv("NEURON_RT_VISIBLE_CORES", "1-2", 1);
  setenv("LOCAL_RANK", "5", 1);
  CHECK_OK(nrt_config_from_env(&cfg));
  CHECK(cfg.device_count == 2 && cfg.first_device == 1);
  setenv("LOCAL_RANK", "not-a-rank", 1); /* the launcher's, not ours: ignored */
  CHECK_OK(nrt_config_from_env(&cfg));
  CHECK(cfg.first_device == 0);

  static const struct { const char *name, *value; } bad[] = {
      {"TORCHNEURON_DEVICE_COUNT", "0"},      {"TORCHNEURON_DEVICE_COUNT", "65"},
      {"TORCHNEURON_DEVICE_COUNT", "two"},    {"TORCHNEURON_DEVICE_COUNT", ""},
      {"TORCHNEURON_HBM_SIZE", "1M"},         /* below the 64M floor */
      {"TORCHNEURON_HBM_SIZE", "12X"},        {"TORCHNEURON_HBM_SIZE", "65T"},
      {"TORCHNEURON_NUM_THREADS", "-3"},      {"TORCHNEURON_NUM_THREADS", "1025"},
      {"TORCHNEURON_NUM_THREADS", "many"},    {"TORCHNEURON_LAUNCH_BLOCKING", "yes"},
      {"TORCHNEURON_LAUNCH_BLOCKING", "2"},   {"TORCHNEURON_TRACE_CAPACITY", "15"},
      {"TORCHNEURON_TRACE_CAPACITY", "1e6"},  {"NEURON_RT_VISIBLE_CORES", "2"},
      {"NEURON_RT_VISIBLE_CORES", "0,0"},     {"TORCHNEURON_PIN_THREADS", "yes"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) check_rejected(bad[i].name, bad[i].value);
}

/* The real initialisation reports the error, every time, to every call. */
static void test_init_failure(void) {
  clear_env();
  setenv("TORCHNEURON_NUM_THREADS", "many", 1);
  CHECK(nrt_init() == NRT_ERROR_INVALID_CONFIG);
  CHECK(nrt_init() == NRT_ERROR_INVALID_CONFIG);
  CHECK(strstr(nrt_last_error(), "TORCHNEURON_NUM_THREADS") != NULL);
  unsetenv("TORCHNEURON_NUM_THREADS"); /* read once: fixing it later changes nothing */
  int count = -1;
  CHECK(nrt_device_count(&count) == NRT_ERROR_INVALID_CONFIG && count == 0);
  CHECK(nrt_stream_default(0) == NULL);
  nrt_device_props props;
  CHECK(nrt_device_props_get(0, &props) == NRT_ERROR_INVALID_CONFIG);
  nrt_mem_stats st;
  CHECK(nrt_mem_stats_get(0, &st) == NRT_ERROR_INVALID_CONFIG);
  nrt_stream *s = NULL;
  CHECK(nrt_stream_from_pool(0, 0, &s) == NRT_ERROR_INVALID_CONFIG);
  CHECK(nrt_mem_device_of(&count) == -1);
}

int main(void) {
  test_parse_size();
  test_parse_int();
  test_parse_core_list();
  test_config();
  test_init_failure();
  return CHECK_SUMMARY();
}
