/*
 * seccomp-load COMMAND — installs a compiled seccomp filter on itself, then runs `bash -c COMMAND`.
 *
 * The fast path of the sandbox's seccomp launcher under gVisor (docs/decisions/0008): the exec-host
 * compiles the container's validated profile once with the image's own launcher (`seccomp-exec
 * --export-bpf`, libseccomp, in a throwaway container) and passes the BPF program, base64-encoded,
 * in LEMNISCATE_SANDBOX_SECCOMP_BPF. Anything unexpected refuses the command (exit 126): it never
 * runs unfiltered. Built static by build-offline.sh, installed root-owned on the read-only root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ENV_NAME "LEMNISCATE_SANDBOX_SECCOMP_BPF"

static void refuse(const char *reason) {
  fprintf(stderr, "The command was not run: %s\n", reason);
  fflush(stderr);
  _exit(126);
}

static int b64value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Strict base64 (padding required, no whitespace); returns the decoded length or -1. */
static long b64decode(const char *in, unsigned char *out, size_t cap) {
  size_t len = strlen(in);
  if (len == 0 || len % 4 != 0) return -1;
  size_t n = 0;
  for (size_t i = 0; i < len; i += 4) {
    int v[4];
    for (int j = 0; j < 4; j++) {
      unsigned char c = (unsigned char)in[i + j];
      if (c == '=' && i + 4 == len && j >= 2) {
        v[j] = -2;
      } else {
        v[j] = b64value(c);
        if (v[j] < 0) return -1;
      }
    }
    if (v[2] == -2 && v[3] != -2) return -1;
    if (n + 3 > cap) return -1;
    out[n++] = (unsigned char)((v[0] << 2) | (v[1] >> 4));
    if (v[2] != -2) out[n++] = (unsigned char)(((v[1] & 15) << 4) | (v[2] >> 2));
    if (v[3] != -2) out[n++] = (unsigned char)(((v[2] & 3) << 6) | v[3]);
  }
  return (long)n;
}

int main(int argc, char **argv) {
  if (argc != 2) refuse("the loader takes exactly one argument, the command.");
  const char *encoded = getenv(ENV_NAME);
  if (encoded == NULL || encoded[0] == '\0') refuse("no compiled seccomp filter was passed to the loader.");

  static unsigned char program[BPF_MAXINSNS * sizeof(struct sock_filter) + 3];
  long size = b64decode(encoded, program, sizeof program);
  if (size <= 0 || size % (long)sizeof(struct sock_filter) != 0) refuse("the compiled seccomp filter is not a whole BPF program.");
  if (unsetenv(ENV_NAME) != 0) refuse("the loader could not clear its own variable.");

  struct sock_fprog prog = { .len = (unsigned short)(size / (long)sizeof(struct sock_filter)), .filter = (struct sock_filter *)program };
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) refuse("no_new_privs could not be set.");
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    char reason[160];
    snprintf(reason, sizeof reason, "the kernel refused the seccomp filter (%s).", strerror(errno));
    refuse(reason);
  }
  /* Believe the kernel, not the return code: the filter must be in force before bash starts. */
  if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != SECCOMP_MODE_FILTER) refuse("the seccomp filter is not in force after loading it.");

  char *const args[] = { "/bin/bash", "-c", argv[1], NULL };
  extern char **environ;
  execve("/bin/bash", args, environ);
  fprintf(stderr, "bash could not be started: %s\n", strerror(errno));
  return 126;
}
