#define _GNU_SOURCE /* setenv, usleep */
/* Configuration parsing: strict, every bad value rejected. */
#include <stdlib.h>
#include <string.h>

#include "../../runtime/src/internal.h"
#include "check.h"

int main(void) {
  uint64_t v = 0;
  CHECK(nrt_parse_size("1024", &v) == 0 && v == 1024);
  CHECK(nrt_parse_size("16G", &v) == 0 && v == (uint64_t)16 << 30);
  CHECK(nrt_parse_size("64m", &v) == 0 && v == (uint64_t)64 << 20);
  CHECK(nrt_parse_size("2T", &v) == 0 && v == (uint64_t)2 << 40);
  CHECK(nrt_parse_size("8GB", &v) == 0 && v == (uint64_t)8 << 30);
  CHECK(nrt_parse_size("", &v) == -1);
  CHECK(nrt_parse_size("G", &v) == -1);
  CHECK(nrt_parse_size("-1", &v) == -1);
  CHECK(nrt_parse_size("12X", &v) == -1);
  CHECK(nrt_parse_size("1 G", &v) == -1);
  CHECK(nrt_parse_size("99999999999999999999", &v) == -1);
  CHECK(nrt_parse_size("99999999999T", &v) == -1); /* overflows when shifted */
  long n = 0;
  CHECK(nrt_parse_int("4", 1, 64, &n) == 0 && n == 4);
  CHECK(nrt_parse_int("0", 1, 64, &n) == -1);
  CHECK(nrt_parse_int("65", 1, 64, &n) == -1);
  CHECK(nrt_parse_int("4x", 1, 64, &n) == -1);
  CHECK(nrt_parse_int("", 1, 64, &n) == -1);

  nrt_config cfg;
  setenv("TORCHNEURON_DEVICE_COUNT", "3", 1);
  setenv("TORCHNEURON_HBM_SIZE", "256M", 1);
  CHECK(nrt_config_from_env(&cfg) == NRT_SUCCESS);
  CHECK(cfg.device_count == 3 && cfg.hbm_bytes == (uint64_t)256 << 20);
  setenv("TORCHNEURON_HBM_SIZE", "1M", 1); /* below the 64M floor */
  CHECK(nrt_config_from_env(&cfg) == NRT_ERROR_INVALID_CONFIG);
  CHECK(strstr(nrt_last_error(), "TORCHNEURON_HBM_SIZE") != NULL);
  unsetenv("TORCHNEURON_HBM_SIZE");
  setenv("TORCHNEURON_NUM_THREADS", "many", 1);
  CHECK(nrt_config_from_env(&cfg) == NRT_ERROR_INVALID_CONFIG);
  CHECK(strstr(nrt_last_error(), "TORCHNEURON_NUM_THREADS") != NULL);

  /* The real initialisation reports the same error, every time. */
  CHECK(nrt_init() == NRT_ERROR_INVALID_CONFIG);
  CHECK(nrt_init() == NRT_ERROR_INVALID_CONFIG);
  CHECK(strstr(nrt_last_error(), "TORCHNEURON_NUM_THREADS") != NULL);
  int count = -1;
  CHECK(nrt_device_count(&count) == NRT_ERROR_INVALID_CONFIG && count == 0);
  CHECK(nrt_stream_default(0) == NULL);
  return CHECK_SUMMARY();
}
