/* validate_demo FILE...: prints every finding oi_validate reports, one line each:
 * "<file> <severity> <code> <offset>", and exits 2 if any finding is an error. */
#include <stdio.h>
#include <stdlib.h>

#include "offload_image.h"

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  unsigned char *buf;
  long n;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return NULL;
  }
  buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return buf;
}

int main(int argc, char **argv) {
  static const char *severity[] = {"note", "warning", "error"};
  int status = 0;
  int a;
  for (a = 1; a < argc; a++) {
    size_t len = 0, i, n;
    unsigned char *data = slurp(argv[a], &len);
    oi_error err;
    oi_validation *v;
    if (!data) {
      fprintf(stderr, "cannot read %s\n", argv[a]);
      return 3;
    }
    v = oi_validate(data, len, NULL, &err);
    if (!v) {
      fprintf(stderr, "oi_validate: %s\n", oi_status_name(err.code));
      return 3;
    }
    n = oi_validation_count(v);
    for (i = 0; i < n; i++) {
      oi_finding f;
      if (oi_validation_finding(v, i, &f, &err) != OI_OK) return 3;
      printf("%s %s %s %llu\n", argv[a], severity[f.severity], f.code.data,
             (unsigned long long)f.offset);
    }
    if (oi_validation_finding(v, n, NULL, &err) != OI_ERR_INVALID_ARGUMENT) return 3;
    if (oi_validation_worst(v) == OI_SEVERITY_ERROR) status = 2;
    oi_validation_free(v);
    free(data);
  }
  return status;
}
