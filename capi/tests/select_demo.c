/* A runtime-plugin-style user of the C API: reads a file, selects an image per unit for
 * each target given on the command line, and prints one line per unit and target:
 *   <target> <unit> <found> <offset|-> <size> <id>
 * then, with --extract, copies the first selected image into OUT and prints its size. */
#include "offload_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return buf;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s FILE TARGET... [--extract OUT]\n", argv[0]);
    return 2;
  }
  size_t len = 0;
  unsigned char *data = read_file(argv[1], &len);
  if (!data) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  const char *extract_to = NULL;
  for (int a = 2; a + 1 < argc; a++)
    if (strcmp(argv[a], "--extract") == 0) extract_to = argv[a + 1];
  int status = 0;
  oi_selection results[64];
  oi_error err;
  for (int a = 2; a < argc; a++) {
    if (strcmp(argv[a], "--extract") == 0 && a + 1 < argc) {
      a++;
      continue;
    }
    size_t units = 0;
    int32_t rc = oi_select(data, len, argv[a], NULL, results, 64, &units, &err);
    if (rc != OI_OK && rc != OI_NO_MATCH) {
      fprintf(stderr, "error %s: %s\n", oi_status_name(rc), err.message);
      free(data);
      return 2;
    }
    if (rc == OI_NO_MATCH) status = 1;
    for (size_t u = 0; u < units && u < 64; u++) {
      const oi_selection *s = &results[u];
      if (s->found && s->image.offset != OI_NO_OFFSET)
        printf("%s %zu 1 %llu %llu %s\n", argv[a], u, (unsigned long long)s->image.offset,
               (unsigned long long)s->image.size, s->image.id);
      else if (s->found)
        printf("%s %zu 1 - %llu %s\n", argv[a], u, (unsigned long long)s->image.size, s->image.id);
      else
        printf("%s %zu 0 - 0 -\n", argv[a], u);
    }
    if (extract_to && units > 0 && results[0].found) {
      size_t size = 0;
      rc = oi_extract(data, len, results[0].image.unit, results[0].image.index, NULL, NULL, 0, &size, &err);
      if (rc != OI_ERR_BUFFER_TOO_SMALL && rc != OI_OK) {
        fprintf(stderr, "extract: %s\n", err.message);
        return 2;
      }
      unsigned char *buf = malloc(size ? size : 1);
      rc = oi_extract(data, len, results[0].image.unit, results[0].image.index, NULL, buf, size, &size, &err);
      if (rc != OI_OK) {
        fprintf(stderr, "extract: %s\n", err.message);
        return 2;
      }
      FILE *f = fopen(extract_to, "wb");
      fwrite(buf, 1, size, f);
      fclose(f);
      free(buf);
      printf("extracted %zu\n", size);
      extract_to = NULL;
    }
  }
  /* Errors name the problem and the byte offset. */
  size_t count = 0;
  int32_t rc = oi_list(data, len > 100 ? 100 : len, NULL, 0, &count, &err);
  printf("truncated-list %s %llu\n", oi_status_name(rc), (unsigned long long)err.offset);
  free(data);
  return status;
}
