/* A runtime-plugin-style user of the C API: reads a file, selects an image per unit for
 * each target given on the command line (all targets in one oi_reader_select call), and
 * prints one line per unit and target:
 *   <target> <unit> <found> <offset|-> <size> <id>
 * then, with --extract, writes the image chosen for the first unit and the first target
 * to OUT and prints its size. */
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
  const char **targets = calloc((size_t)argc, sizeof *targets);
  size_t n = 0;
  for (int a = 2; a < argc; a++) {
    if (strcmp(argv[a], "--extract") == 0 && a + 1 < argc)
      extract_to = argv[++a];
    else
      targets[n++] = argv[a];
  }
  oi_error err;
  oi_reader *r = oi_reader_open(data, len, NULL, &err);
  if (!r) {
    fprintf(stderr, "error %s: %s\n", oi_status_name(err.code), err.message.data);
    return 2;
  }
  size_t units = oi_reader_unit_count(r);
  oi_selection *results = calloc(units * n + 1, sizeof *results);
  int32_t rc = oi_reader_select(r, targets, n, NULL, results, units * n, &err);
  if (rc != OI_OK && rc != OI_NO_MATCH) {
    fprintf(stderr, "error %s: %s\n", oi_status_name(rc), err.message.data);
    return 2;
  }
  int status = rc == OI_NO_MATCH ? 1 : 0;
  for (size_t t = 0; t < n; t++) {
    for (size_t u = 0; u < units; u++) {
      const oi_selection *s = &results[u * n + t];
      oi_image_info info;
      if (!s->found) {
        printf("%s %zu 0 - 0 -\n", targets[t], u);
        continue;
      }
      if (oi_reader_image(r, s->image, &info, &err) != OI_OK) {
        fprintf(stderr, "image: %s\n", err.message.data);
        return 2;
      }
      if (info.offset != OI_NO_OFFSET)
        printf("%s %zu 1 %llu %llu %s\n", targets[t], u, (unsigned long long)info.offset,
               (unsigned long long)info.size, info.name.data);
      else
        printf("%s %zu 1 - %llu %s\n", targets[t], u, (unsigned long long)info.size,
               info.name.data);
    }
  }
  if (extract_to && units > 0 && n > 0 && results[0].found) {
    const uint8_t *bytes = NULL;
    size_t size = 0;
    if (oi_reader_image_data(r, results[0].image, &bytes, &size, &err) != OI_OK) {
      fprintf(stderr, "extract: %s\n", err.message.data);
      return 2;
    }
    FILE *f = fopen(extract_to, "wb");
    if (!f || fwrite(bytes, 1, size, f) != size) return 2;
    fclose(f);
    printf("extracted %zu\n", size);
  }
  oi_reader_close(r);
  /* Errors name the problem and the byte offset. */
  oi_reader *bad = oi_reader_open(data, len > 100 ? 100 : len, NULL, &err);
  printf("truncated-list %s %llu\n", oi_status_name(err.code), (unsigned long long)err.offset);
  oi_reader_close(bad);
  free(results);
  free(targets);
  free(data);
  return status;
}
