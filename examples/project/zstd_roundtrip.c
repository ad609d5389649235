/* Compresses and decompresses a buffer with the zstd objects strata built or restored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zstd.h"

int main(void) {
  size_t n = 1 << 20;
  char *src = malloc(n);
  for (size_t i = 0; i < n; i++) src[i] = (char)("strata layered cache "[i % 21] ^ (i / 4096));
  size_t bound = ZSTD_compressBound(n);
  char *dst = malloc(bound);
  size_t c = ZSTD_compress(dst, bound, src, n, 3);
  if (ZSTD_isError(c)) { fprintf(stderr, "compress: %s\n", ZSTD_getErrorName(c)); return 1; }
  char *back = malloc(n);
  size_t d = ZSTD_decompress(back, n, dst, c);
  if (ZSTD_isError(d) || d != n || memcmp(src, back, n) != 0) { fprintf(stderr, "round trip failed\n"); return 1; }
  printf("zstd %s round trip ok: %zu -> %zu bytes\n", ZSTD_versionString(), n, c);
  return 0;
}
