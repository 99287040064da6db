//===- kiln-launch.cpp - restart a failed multi-rank job ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
//   kiln-launch [--max-restarts N] -- COMMAND [ARGS...]
//   kiln-launch [--max-restarts N] --exe R=EXE... [--ranks-file F]
//               [--min-ranks M] -- mpirun -np {ranks} {exe} ARGS...
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
//
// Fewer ranks (task migration): a plan is compiled for one mesh, so each
// rank count the job may run on needs its executable, `--exe R=EXE` (one per
// R, from `kiln-compile --mesh dp=R`); COMMAND then says `{ranks}` and
// `{exe}` where they go. Before each attempt the ranks available are read
// from --ranks-file (a number the scheduler or an operator keeps current;
// without one, the largest R), and the job runs on the largest R given that
// many; below --min-ranks (default: the smallest R) it gives up. Checkpoints
// resume across meshes (docs/Distributed.md), so the job continues from the
// newest one on the new mesh.
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
#include <fstream>
#include <map>
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
      "       kiln-launch [--max-restarts N] --exe R=EXE... [--ranks-file F]\n"
      "                   [--min-ranks M] -- mpirun -np {ranks} {exe} ARGS...\n"
      "  Runs COMMAND (e.g. mpirun -np 4 model.train ... --checkpoint-dir DIR)\n"
      "  and, when it fails, runs it again with --resume from the newest\n"
      "  checkpoint in DIR, at most N times (default 3). With --exe, each\n"
      "  attempt runs on the largest R (the executable compiled for dp=R) the\n"
      "  ranks available (--ranks-file: a number) allow, at least --min-ranks.\n");
}

long parseCount(const std::string &flag, const std::string &v, long lo, long hi) {
  char *end = nullptr;
  errno = 0;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || errno || *end || n < lo || n > hi)
    die(flag + " needs an integer in [" + std::to_string(lo) + ", " +
        std::to_string(hi) + "], got '" + v + "'");
  return n;
}

/// The ranks available now: --ranks-file's number (-1 when it cannot be
/// read, with `why`).
long ranksAvailable(const std::string &file, std::string &why) {
  std::ifstream in(file);
  long n = -1;
  if (!(in >> n) || n < 0) {
    why = "--ranks-file " + file + " does not hold a number of ranks";
    return -1;
  }
  return n;
}

/// COMMAND with {ranks} and {exe} filled in.
std::vector<std::string> instantiate(const std::vector<std::string> &cmd,
                                     long ranks, const std::string &exe) {
  std::vector<std::string> out;
  for (std::string a : cmd) {
    for (const auto &[key, val] :
         {std::pair<std::string, std::string>{"{ranks}", std::to_string(ranks)},
          {"{exe}", exe}}) {
      size_t at;
      while ((at = a.find(key)) != std::string::npos)
        a.replace(at, key.size(), val);
    }
    out.push_back(a);
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  long maxRestarts = 3, minRanks = -1;
  std::map<long, std::string> exes; // --exe R=EXE
  std::string ranksFile;
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
    // --flag VALUE or --flag=VALUE.
    auto value = [&](const char *flag, std::string &v) {
      std::string f = flag;
      if (a == f && i + 1 < argc) {
        v = argv[++i];
        return true;
      }
      if (a.rfind(f + "=", 0) == 0) {
        v = a.substr(f.size() + 1);
        return true;
      }
      return false;
    };
    std::string v;
    if (value("--max-restarts", v)) {
      maxRestarts = parseCount("--max-restarts", v, 0, 1000);
    } else if (value("--min-ranks", v)) {
      minRanks = parseCount("--min-ranks", v, 1, 1 << 20);
    } else if (value("--ranks-file", v)) {
      ranksFile = v;
    } else if (value("--exe", v)) {
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq + 1 == v.size())
        die("--exe needs R=EXE (the executable compiled for --mesh dp=R), got '" +
            v + "'");
      long r = parseCount("--exe's R", v.substr(0, eq), 1, 1 << 20);
      if (!exes.emplace(r, v.substr(eq + 1)).second)
        die("--exe names two executables for " + std::to_string(r) + " ranks");
    } else {
      die("unknown argument '" + a + "' (usage: kiln-launch [--max-restarts N] "
          "-- COMMAND [ARGS...])");
    }
  }
  if (i >= argc)
    die("no command: kiln-launch [--max-restarts N] -- COMMAND [ARGS...]");
  std::vector<std::string> cmd(argv + i, argv + argc);
  bool placeholders = false;
  for (const std::string &a : cmd)
    placeholders |= a.find("{ranks}") != std::string::npos ||
                    a.find("{exe}") != std::string::npos;
  if (exes.empty() && (placeholders || minRanks > 0 || !ranksFile.empty()))
    die("--min-ranks, --ranks-file and {ranks}/{exe} need the executables, one "
        "per rank count: --exe R=EXE (kiln-compile --mesh dp=R)");
  if (!exes.empty() && !placeholders)
    die("with --exe, the command says where the rank count and the executable "
        "go: ... mpirun -np {ranks} {exe} ...");
  if (!exes.empty() && minRanks < 0)
    minRanks = exes.begin()->first;
  if (!exes.empty() && exes.rbegin()->first < minRanks)
    die("--min-ranks " + std::to_string(minRanks) + " is above every --exe's "
        "rank count");

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
  // The largest mesh the ranks available allow (-1: none), and how many
  // are available.
  auto pickRanks = [&](long &avail) {
    avail = exes.rbegin()->first;
    std::string why;
    if (!ranksFile.empty() && (avail = ranksAvailable(ranksFile, why)) < 0)
      die(why);
    long pick = -1;
    for (const auto &[r, exe] : exes)
      if (r <= avail && r >= minRanks)
        pick = r;
    return pick;
  };
  long ranks = exes.empty() ? -1 : exes.rbegin()->first;
  for (long restarts = 0;; ++restarts) {
    std::vector<std::string> args = cmd;
    if (!exes.empty()) {
      long avail;
      long pick = pickRanks(avail);
      if (pick < 0) {
        say("only " + std::to_string(avail) + " ranks available, below "
            "--min-ranks " + std::to_string(minRanks) + " (or no --exe for as few): "
            "giving up");
        return 1;
      }
      if (restarts > 0 && pick != ranks)
        say("going on with " + std::to_string(pick) + " ranks (was " +
            std::to_string(ranks) + "; " + std::to_string(avail) +
            " available): " + exes[pick]);
      ranks = pick;
      args = instantiate(cmd, ranks, exes[ranks]);
    }
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
    std::string what = "attempt " + std::to_string(restarts + 1) +
                       (ranks > 0 ? " (" + std::to_string(ranks) + " ranks)" : "") +
                       " failed (" + describe(a.status) + ") after " +
                       seconds(failedAt - began);
    std::string from = ck >= 0 ? "the checkpoint at step " + std::to_string(ck)
                               : "the start (no checkpoint yet)";
    if (restarts >= maxRestarts) {
      say(what + "; giving up after " + std::to_string(restarts) +
          " restart" + (restarts == 1 ? "" : "s") + " (--max-restarts " +
          std::to_string(maxRestarts) + ")");
      return WIFEXITED(a.status) && WEXITSTATUS(a.status) ? WEXITSTATUS(a.status) : 1;
    }
    // A job on fewer ranks than the one that failed is a new situation (a
    // node gone): it gets its restart even without a newer checkpoint.
    long availNow = 0;
    bool shrinks = !exes.empty() && pickRanks(availNow) != ranks;
    if (ck == lastFailureCheckpoint && !shrinks) {
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
