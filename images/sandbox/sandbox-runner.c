/*
 * sandbox-runner PROGRAM [ARG...] — starts the sandbox's commands, one at a time, for the whole life
 * of the sandbox, so a command costs a fork and an exec instead of a process started by the engine.
 *
 * The exec-host starts it once per sandbox with an engine exec (as the sandbox user, in the working
 * copy, with the sandbox's environment) and talks to it over that exec's stdin and stdout in frames:
 * one type byte, the payload's length (4 bytes, big-endian), the payload.
 *
 *   in   'C' TEXT   run PROGRAM ARG... TEXT (one command at a time)
 *        'K'        kill every other process of the sandbox user, and answer once none is left
 *   out  'R' "1"    ready (once, first)
 *        'O' BYTES  the command's stdout          'E' BYTES  its stderr
 *        'X' STATUS its end: 4 bytes, the exit code, or 128 + the signal that ended it
 *        'F' TEXT   the command could not be started (the runner goes on)
 *        'k' BYTE   the kill is over: 0 nothing is left, 2 something still was after every round
 *
 * Out of a command's reach (docs/decisions/0016): it makes itself undumpable first, so no process of
 * its user may trace it, write into its memory (/proc/PID/mem) or open its descriptors
 * (/proc/PID/fd); every command starts in a session of its own (`kill 0` reaches the command's
 * group, not the runner); its kill is kill(-1), which spares the caller and pid 1 and needs no new
 * process when a fork bomb holds every slot. A command that still signals it (its pid is visible,
 * and it is the same user) only ends or stops its own sandbox's runner: the exec-host then kills
 * every process of the sandbox the engine's way and starts another runner. When its stdin closes
 * (the exec-host went away) it kills what is left and exits. Built static by build-offline.sh and the
 * Dockerfile, installed root-owned on the read-only root.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME (4u << 20)
#define CHUNK 65536
#define KILL_ROUNDS 1000

static int wake_pipe[2] = { -1, -1 };
static char **program;
static int program_len;

static pid_t child = -1;
static int child_out = -1, child_err = -1;
static int child_done = 0, child_status = 0;

/* Set once the runner knows it is not root: kill(-1) as root would reach every process it can see. */
static int may_kill = 0;

/* Ends the runner, and with it every other process of the sandbox user: nothing a command started
 * outlives the runner that was to kill it. */
static void die(const char *why) {
  fprintf(stderr, "sandbox-runner: %s\n", why);
  if (may_kill) kill(-1, SIGKILL);
  _exit(2);
}

static void write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("the exec-host is gone");
    }
    p += n;
    len -= (size_t)n;
  }
}

static void send_frame(char type, const void *data, uint32_t len) {
  unsigned char head[5] = { (unsigned char)type, (unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8), (unsigned char)len };
  write_all(1, head, sizeof head);
  if (len > 0) write_all(1, data, len);
}

static void send_text(char type, const char *text) { send_frame(type, text, (uint32_t)strlen(text)); }

static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  char b = 0;
  (void)!write(wake_pipe[1], &b, 1);
  errno = saved;
}

/* Reaps every ended child; the command's own end is kept for its 'X' frame. */
static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    if (pid == child) {
      child_done = 1;
      child_status = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    }
  }
}

/* Forwards what a pipe holds now; closes it at its end. Non-blocking: a process the command left
 * behind may hold the pipe open, and the command is over when its first process is. */
static void forward(int *fd, char type) {
  static char buf[CHUNK];
  while (*fd >= 0) {
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n > 0) {
      send_frame(type, buf, (uint32_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close(*fd);
    *fd = -1;
  }
}

static void finish_command(void) {
  forward(&child_out, 'O');
  forward(&child_err, 'E');
  if (child_out >= 0) close(child_out);
  if (child_err >= 0) close(child_err);
  child_out = child_err = -1;
  unsigned char st[4] = { (unsigned char)(child_status >> 24), (unsigned char)(child_status >> 16), (unsigned char)(child_status >> 8), (unsigned char)child_status };
  child = -1;
  child_done = 0;
  send_frame('X', st, 4);
}

static void start_command(const char *text) {
  if (child > 0) {
    send_text('F', "another command is still running in this sandbox.");
    return;
  }
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    send_text('F', strerror(errno));
    return;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    send_text('F', strerror(errno));
    close(out[0]);
    close(out[1]);
    return;
  }
  char **argv = calloc((size_t)program_len + 2, sizeof *argv);
  if (!argv) die("out of memory");
  for (int i = 0; i < program_len; i++) argv[i] = program[i];
  argv[program_len] = (char *)text;
  pid_t pid = fork();
  if (pid < 0) {
    char why[200];
    /* Said as bash says it, so the exec-host reads a full process cap the same way. */
    snprintf(why, sizeof why, "The command could not be started: fork: %s", strerror(errno));
    send_text('F', why);
    free(argv);
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    return;
  }
  if (pid == 0) {
    /* The command: defaults back, a session of its own, /dev/null for stdin, its pipes for output. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    setsid();
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) _exit(126);
    if (null > 2) close(null);
    extern char **environ;
    execve(argv[0], argv, environ);
    dprintf(2, "%s could not be started: %s\n", argv[0], strerror(errno));
    _exit(126);
  }
  free(argv);
  close(out[1]);
  close(err[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  child = pid;
  child_out = out[0];
  child_err = err[0];
  child_done = 0;
}

/* A process of this user other than the runner, not yet ended (zombies have ended). */
static int others_left(void) {
  DIR *d = opendir("/proc");
  if (!d) return 1;
  pid_t self = getpid();
  uid_t me = getuid();
  int left = 0;
  struct dirent *e;
  while (!left && (e = readdir(d)) != NULL) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    pid_t pid = (pid_t)atoi(e->d_name);
    if (pid == self || pid == 1) continue;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue; /* gone since the listing */
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    const char *state = strstr(buf, "\nState:");
    const char *uid = strstr(buf, "\nUid:");
    if (!state || !uid) {
      left = 1;
      break;
    }
    state += strlen("\nState:");
    while (*state == ' ' || *state == '\t') state++;
    if (*state == 'Z' || *state == 'X') continue;
    if ((uid_t)strtoul(uid + strlen("\nUid:"), NULL, 10) == me) left = 1;
  }
  closedir(d);
  return left;
}

/* kill(-1) reaches every process the caller may signal but pid 1 and itself, in one pass. Repeated
 * until no live process of this user is left: a process stopped in the kernel ends a moment later. */
static void kill_others(void) {
  unsigned char status = 2;
  for (int round = 0; round < KILL_ROUNDS; round++) {
    kill(-1, SIGKILL);
    reap();
    if (!others_left()) {
      status = 0;
      break;
    }
    if (round >= 10) {
      struct timespec pause = { 0, 5 * 1000 * 1000 };
      nanosleep(&pause, NULL);
    }
  }
  send_frame('k', &status, 1);
}

int main(int argc, char **argv) {
  /* kill(-1) as root would reach every process of the pid namespace, the keeper's included. */
  if (getuid() == 0 || geteuid() == 0) die("runs as the sandbox user only, never as root");
  if (argc < 2) die("usage: sandbox-runner PROGRAM [ARG...]");
  may_kill = 1;
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) die("could not make itself undumpable");
  program = argv + 1;
  program_len = argc - 1;
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) die("no pipe");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_child;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGCHLD, &sa, NULL) != 0) die("no SIGCHLD handler");
  /* The protocol's own descriptors never reach a command: 1 and 2 are replaced, 0 becomes /dev/null. */
  for (int fd = 3; fd < 64; fd++)
    if (fd != wake_pipe[0] && fd != wake_pipe[1]) fcntl(fd, F_SETFD, FD_CLOEXEC);
  send_text('R', "1");

  static unsigned char in[MAX_FRAME + 5];
  size_t have = 0;
  int input_open = 1;
  while (input_open || child > 0) {
    struct pollfd fds[4];
    int n = 0;
    fds[n++] = (struct pollfd){ .fd = wake_pipe[0], .events = POLLIN };
    int in_at = -1, out_at = -1, err_at = -1;
    if (input_open) {
      in_at = n;
      fds[n++] = (struct pollfd){ .fd = 0, .events = POLLIN };
    }
    if (child_out >= 0) {
      out_at = n;
      fds[n++] = (struct pollfd){ .fd = child_out, .events = POLLIN };
    }
    if (child_err >= 0) {
      err_at = n;
      fds[n++] = (struct pollfd){ .fd = child_err, .events = POLLIN };
    }
    if (poll(fds, (nfds_t)n, -1) < 0) {
      if (errno == EINTR) continue;
      die("poll failed");
    }
    if (fds[0].revents) {
      char drain[64];
      while (read(wake_pipe[0], drain, sizeof drain) > 0) {
      }
      reap();
    }
    if (out_at >= 0 && fds[out_at].revents) forward(&child_out, 'O');
    if (err_at >= 0 && fds[err_at].revents) forward(&child_err, 'E');
    if (child > 0 && child_done) finish_command();
    if (in_at >= 0 && fds[in_at].revents) {
      ssize_t got = read(0, in + have, sizeof in - have);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        input_open = 0;
        break;
      }
      have += (size_t)got;
      for (;;) {
        if (have < 5) break;
        uint32_t len = ((uint32_t)in[1] << 24) | ((uint32_t)in[2] << 16) | ((uint32_t)in[3] << 8) | in[4];
        if (len > MAX_FRAME) die("a frame longer than the runner takes");
        if (have < 5 + (size_t)len) break;
        char type = (char)in[0];
        if (type == 'C') {
          if (memchr(in + 5, 0, len) != NULL) {
            send_text('F', "the command holds a NUL byte.");
          } else {
            char *text = malloc((size_t)len + 1);
            if (!text) die("out of memory");
            memcpy(text, in + 5, len);
            text[len] = 0;
            start_command(text);
            free(text);
          }
        } else if (type == 'K') {
          kill_others();
          if (child > 0 && child_done) finish_command();
        } else {
          die("an unknown frame");
        }
        memmove(in, in + 5 + len, have - 5 - len);
        have -= 5 + (size_t)len;
      }
    }
  }
  /* The exec-host is gone: nothing of the sandbox user outlives it. */
  kill(-1, SIGKILL);
  return 0;
}
