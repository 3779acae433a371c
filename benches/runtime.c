/* Runs a command once and prints "WALL_SECONDS PEAK_RSS_KB EXIT_STATUS CPU_SECONDS"
 * (benches/compare.sh); CPU_SECONDS is the child's user plus system time, all its threads.
 *
 *   runtime [-e FILE]... [-o OUT] -- COMMAND [ARG]...
 *
 * Like `/usr/bin/time -f '%e %M %x'`: the peak RSS is the child's ru_maxrss from wait4, but
 * the wall time comes from CLOCK_MONOTONIC in nanoseconds (GNU time prints %e in
 * hundredths of a second, too coarse for runs of a few milliseconds). The child's stdout
 * goes to OUT (default /dev/null). Each -e FILE is dropped from the page cache first
 * (posix_fadvise DONTNEED on that file only) for a cold-cache run.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void evict(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    exit(125);
  }
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

int main(int argc, char **argv) {
  const char *out = "/dev/null";
  int i = 1;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    } else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc) {
      evict(argv[++i]);
    } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      fprintf(stderr, "usage: runtime [-e FILE]... [-o OUT] -- COMMAND [ARG]...\n");
      return 125;
    }
  }
  if (i >= argc) {
    fprintf(stderr, "runtime: no command\n");
    return 125;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 125;
  }
  if (pid == 0) {
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0) _exit(126);
    execvp(argv[i], argv + i);
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0) {
    perror("wait4");
    return 125;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  printf("%.6f %ld %d %.6f\n", wall, ru.ru_maxrss, code, cpu);
  return 0;
}
