/* Drives AMD comgr's amd_comgr_lookup_code_object the way ROCm CLR does, for tests.
 *
 *   lookup --isas                      print every ISA name comgr knows, one a line
 *   lookup FILE DATA_SIZE ISA... < BUNDLES
 *
 * BUNDLES: one line per bundle, "OFFSET" = where the bundle starts in FILE. For each
 * bundle, DATA_SIZE bytes from OFFSET (fewer at the end of the file) are handed to comgr
 * as a FATBIN data object (CLR hands it 4096), and every ISA is looked up in a call of
 * its own. With --together the ISAs are passed in one call, as CLR passes the ISAs of all
 * its devices. Output: one line per bundle and ISA: "BUNDLE_INDEX ISA OFFSET SIZE"
 * (OFFSET relative to the bundle; SIZE 0 = no match), or "BUNDLE_INDEX ISA error STATUS".
 */
#include <amd_comgr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void list_isas(void) {
  size_t n = 0;
  if (amd_comgr_get_isa_count(&n) != AMD_COMGR_STATUS_SUCCESS) exit(3);
  for (size_t i = 0; i < n; i++) {
    const char *name = NULL;
    if (amd_comgr_get_isa_name(i, &name) != AMD_COMGR_STATUS_SUCCESS) exit(3);
    printf("%s\n", name);
  }
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--isas") == 0) {
    list_isas();
    return 0;
  }
  int together = 0;
  if (argc > 1 && strcmp(argv[1], "--together") == 0) {
    together = 1;
    argv++;
    argc--;
  }
  if (argc < 4) {
    fprintf(stderr, "usage: lookup [--together] FILE DATA_SIZE ISA... < OFFSETS\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 2;
  }
  size_t data_size = strtoull(argv[2], NULL, 10);
  int nisa = argc - 3;
  char **isas = argv + 3;
  char *buf = malloc(data_size ? data_size : 1);
  amd_comgr_code_object_info_t *q = calloc((size_t)nisa, sizeof *q);
  if (!buf || !q) return 3;
  unsigned long long off;
  int bundle = 0;
  while (scanf("%llu", &off) == 1) {
    if (fseeko(f, (off_t)off, SEEK_SET) != 0) return 3;
    size_t got = fread(buf, 1, data_size, f);
    amd_comgr_data_t data;
    if (amd_comgr_create_data(AMD_COMGR_DATA_KIND_FATBIN, &data) != AMD_COMGR_STATUS_SUCCESS ||
        amd_comgr_set_data(data, got, buf) != AMD_COMGR_STATUS_SUCCESS)
      return 3;
    int rounds = together ? 1 : nisa;
    for (int r = 0; r < rounds; r++) {
      int first = together ? 0 : r, count = together ? nisa : 1;
      for (int j = 0; j < count; j++) {
        q[j].isa = isas[first + j];
        q[j].size = 0;
        q[j].offset = 0;
      }
      amd_comgr_status_t s = amd_comgr_lookup_code_object(data, q, (size_t)count);
      for (int j = 0; j < count; j++) {
        if (s != AMD_COMGR_STATUS_SUCCESS)
          printf("%d %s error %d\n", bundle, isas[first + j], (int)s);
        else
          printf("%d %s %llu %llu\n", bundle, isas[first + j], (unsigned long long)q[j].offset,
                 (unsigned long long)q[j].size);
      }
    }
    amd_comgr_release_data(data);
    bundle++;
  }
  return 0;
}
