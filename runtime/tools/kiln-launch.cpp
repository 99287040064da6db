//===- kiln-launch.cpp - restart a failed multi-rank job ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
//   kiln-launch [--max-restarts N] -- COMMAND [ARGS...]
//
// Runs COMMAND (typically `mpirun -np 4 model.train ... --checkpoint-dir
// DIR`), and when it fails (a rank killed, a node gone, a collective timed
// out) runs it again with `--resume`, which continues from the newest
// complete checkpoint in DIR; up to --max-restarts times (default 3). A
// failure that made no progress since the previous one (no newer
// checkpoint) is not retried: it would fail the same way. COMMAND's stdout
// passes through; kiln-launch's own lines start with "kiln-launch: " and
// say what failed, when, from which checkpoint the job went on, and how long
// it took to get going again (from the failure to the restarted job's
// "resumed from" line). SIGINT and SIGTERM go to the whole job and end it
// without a restart.
//===----------------------------------------------------------------------===//
#include <dirent.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t gStop = 0;
volatile pid_t gChild = 0;

void onSignal(int sig) {
  gStop = sig;
  if (gChild > 0)
    kill(-gChild, sig); // the job's process group: the launcher and its ranks
}

[[noreturn]] void die(const std::string &msg) {
  std::fprintf(stderr, "kiln-launch: %s\n", msg.c_str());
  std::exit(1);
}

void say(const std::string &msg) {
  std::printf("kiln-launch: %s\n", msg.c_str());
  std::fflush(stdout);
}

std::string seconds(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s",
                std::chrono::duration<double>(d).count());
  return buf;
}

/// The newest checkpoint's step in `dir` ("step-00000050" directories; the
/// trainer renames a checkpoint into place only when it is complete), or -1.
long long newestCheckpoint(const std::string &dir) {
  long long best = -1;
  DIR *d = opendir(dir.c_str());
  if (!d)
    return -1;
  while (dirent *e = readdir(d)) {
    const char *n = e->d_name;
    if (std::strncmp(n, "step-", 5) != 0 || !n[5])
      continue;
    char *end = nullptr;
    errno = 0;
    long long s = std::strtoll(n + 5, &end, 10);
    if (!errno && end && !*end && s > best)
      best = s;
  }
  closedir(d);
  return best;
}

std::string describe(int status) {
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  int code = WEXITSTATUS(status);
  std::string s = "exit status " + std::to_string(code);
  if (code > 128 && code < 128 + 65)
    s += std::string(" (a process ended by signal ") +
         std::to_string(code - 128) + ", " + strsignal(code - 128) + ")";
  return s;
}

struct Attempt {
  int status = 0;
  bool resumedSeen = false;
  Clock::time_point resumedAt;
};

/// Runs `argv` in its own process group, passing its stdout through and
/// noting when it prints "resumed from".
Attempt runOnce(const std::vector<std::string> &args) {
  int fds[2];
  if (pipe(fds) != 0)
    die(std::string("pipe: ") + std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0)
    die(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char *> argv;
    for (const std::string &a : args)
      argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "kiln-launch: cannot run '%s': %s\n", argv[0],
                 std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid); // also here: no race with a signal before the child's
  gChild = pid;
  close(fds[1]);
  Attempt a;
  std::string line;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    std::fwrite(buf, 1, (size_t)n, stdout);
    std::fflush(stdout);
    line.append(buf, (size_t)n);
    size_t nl;
    while ((nl = line.find('\n')) != std::string::npos) {
      if (!a.resumedSeen && line.compare(0, nl, "") != 0 &&
          line.substr(0, nl).find("resumed from") != std::string::npos) {
        a.resumedSeen = true;
        a.resumedAt = Clock::now();
      }
      line.erase(0, nl + 1);
    }
  }
  close(fds[0]);
  while (waitpid(pid, &a.status, 0) < 0) {
    if (errno != EINTR)
      die(std::string("waitpid: ") + std::strerror(errno));
  }
  gChild = 0;
  return a;
}

void usage() {
  std::printf(
      "usage: kiln-launch [--max-restarts N] -- COMMAND [ARGS...]\n"
      "  Runs COMMAND (e.g. mpirun -np 4 model.train ... --checkpoint-dir DIR)\n"
      "  and, when it fails, runs it again with --resume from the newest\n"
      "  checkpoint in DIR, at most N times (default 3).\n");
}

} // namespace

int main(int argc, char **argv) {
  long maxRestarts = 3;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    }
    std::string v;
    if (a == "--max-restarts" && i + 1 < argc)
      v = argv[++i];
    else if (a.rfind("--max-restarts=", 0) == 0)
      v = a.substr(15);
    else
      die("unknown argument '" + a + "' (usage: kiln-launch [--max-restarts N] "
          "-- COMMAND [ARGS...])");
    char *end = nullptr;
    errno = 0;
    maxRestarts = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || errno || *end || maxRestarts < 0 || maxRestarts > 1000)
      die("--max-restarts needs an integer in [0, 1000], got '" + v + "'");
  }
  if (i >= argc)
    die("no command: kiln-launch [--max-restarts N] -- COMMAND [ARGS...]");
  std::vector<std::string> cmd(argv + i, argv + argc);

  std::string dir;
  bool hasResume = false;
  for (size_t k = 0; k < cmd.size(); ++k) {
    if (cmd[k] == "--checkpoint-dir" && k + 1 < cmd.size())
      dir = cmd[k + 1];
    else if (cmd[k].rfind("--checkpoint-dir=", 0) == 0)
      dir = cmd[k].substr(17);
    else if (cmd[k] == "--resume")
      hasResume = true;
  }
  if (dir.empty())
    die("the command has no --checkpoint-dir DIR: a restart would start the "
        "training over; give the job a checkpoint directory (and "
        "--checkpoint-every N)");

  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const Clock::time_point start = Clock::now();
  long long lastFailureCheckpoint = -2; // none yet
  Clock::time_point failedAt{};
  std::vector<std::string> history;
  for (long restarts = 0;; ++restarts) {
    std::vector<std::string> args = cmd;
    if (restarts > 0 && !hasResume && newestCheckpoint(dir) >= 0)
      args.push_back("--resume");
    Clock::time_point began = Clock::now();
    Attempt a = runOnce(args);
    if (restarts > 0 && a.resumedSeen)
      history.back() += "; running again " + seconds(a.resumedAt - failedAt) +
                        " after the failure";
    if (gStop) {
      say(std::string("stopped by ") + strsignal(gStop) + "; not restarting");
      return 128 + gStop;
    }
    if (WIFEXITED(a.status) && WEXITSTATUS(a.status) == 0) {
      std::string msg = "finished in " + seconds(Clock::now() - start);
      if (restarts == 0) {
        say(msg);
      } else {
        say(msg + " after " + std::to_string(restarts) + " restart" +
            (restarts == 1 ? "" : "s") + ":");
        for (const std::string &h : history)
          say("  " + h);
      }
      return 0;
    }
    failedAt = Clock::now();
    long long ck = newestCheckpoint(dir);
    std::string what = "attempt " + std::to_string(restarts + 1) + " failed (" +
                       describe(a.status) + ") after " +
                       seconds(failedAt - began);
    std::string from = ck >= 0 ? "the checkpoint at step " + std::to_string(ck)
                               : "the start (no checkpoint yet)";
    if (restarts >= maxRestarts) {
      say(what + "; giving up after " + std::to_string(restarts) +
          " restart" + (restarts == 1 ? "" : "s") + " (--max-restarts " +
          std::to_string(maxRestarts) + ")");
      return WIFEXITED(a.status) && WEXITSTATUS(a.status) ? WEXITSTATUS(a.status) : 1;
    }
    if (ck == lastFailureCheckpoint) {
      say(what + "; no newer checkpoint since the previous failure, so a "
                 "restart would fail the same way: giving up");
      return WIFEXITED(a.status) && WEXITSTATUS(a.status) ? WEXITSTATUS(a.status) : 1;
    }
    lastFailureCheckpoint = ck;
    say(what + "; restarting from " + from + " (restart " +
        std::to_string(restarts + 1) + " of at most " +
        std::to_string(maxRestarts) + ")");
    history.push_back(what + ", went on from " + from);
  }
}
