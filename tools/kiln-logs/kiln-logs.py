#!/usr/bin/python3
# ===- kiln-logs.py - what happened in a training run ------------*- Python -*-===//
# SPDX-License-Identifier: Apache-2.0
#
#   kiln-logs RUN... [--plot curves.png] [--json] [--fail-on-events]
#             [--spike-factor F] [--slowdown-factor F] [--gap-factor F]
#
# Reads one or more training runs and reports what happened in each: the
# steps covered, first and last loss, best eval; then its events, one line
# each with its step: divergence (the first non-finite loss, loss spikes, a
# loss that keeps rising), restarts (a wall-time gap, steps repeated after a
# resume, the log's "resumed from"), stalls (one step far slower than its
# neighbours), throughput drops (a sustained change of the step time, found
# as a change point and reported once with its first step), skipped steps
# (loss scaling) and the log's warnings and interruptions. A clean run says
# "no events". --plot draws the runs' curves side by side into a PNG
# (matplotlib, Agg backend).
#
# A RUN is a metrics file (`OUT --metrics FILE.jsonl`, one JSON object per
# step), a directory holding metrics.jsonl (or one *.jsonl) and optionally
# the run's stdout log (*.log, *.out), or a stdout log alone (told apart by
# content). NAME=RUN names it in the report and the plot's legend.
#
# Exit status: 0 when every run was read (events or not; 2 with
# --fail-on-events when there is any event); 1, with one line naming the file
# (and the line), when an input cannot be read: missing, not a regular file,
# a line that is not a JSON object, a row without an integer "step", a known
# field of the wrong type. Thresholds and the detectors: docs/Training.md,
# "Reading a run: kiln-logs".
# ===------------------------------------------------------------------------===//
import argparse
import glob
import importlib.util
import json
import math
import os
import re
import stat
import sys

PROG = "kiln-logs"

# The first steps of a process (step 0, the first after a restart) are slow
# (page faults, oneDNN primitive creation): no stall, no throughput sample.
WARMUP_STEPS = 3
# Loss spikes: the running median of the previous SPIKE_WINDOW finite losses,
# judged from SPIKE_MIN_HISTORY of them on.
SPIKE_WINDOW = 50
SPIKE_MIN_HISTORY = 20
# A spike must also stand SPIKE_MADS robust standard deviations of the
# log-loss's step-to-step noise (over the previous SPIKE_NOISE_WINDOW losses)
# above the median, so that a noisy run (small batches) does not report its
# ordinary batches.
SPIKE_MADS = 6.0
SPIKE_NOISE_WINDOW = 200
# The loss rising for good: the median of a block of SPIKE_WINDOW losses this
# many times the best block's before it, and every block after it too.
RISING_FACTOR = 2.0
# Throughput change points: segments of at least this many steps.
MIN_SEGMENT = 20
# The median filter that takes single slow steps out before the change-point
# search (an edge survives it).
FILTER_WIDTH = 9
# What an event must cost to be one, whatever the ratios: a wall-time gap
# this long; a stall this much longer than the median step; a throughput
# drop this much time over its steps (so that a run of microsecond steps on
# a busy machine does not report the scheduler's hiccups).
MIN_GAP_S = 1.0
MIN_STALL_S = 0.1
MIN_DROP_COST_S = 0.5
# The loss rising for good must also give back this share of the run's
# progress (the first block's median down to the best), so that a loss
# converged near zero does not report its float noise.
RISING_PROGRESS = 0.1
# A first step this much slower than the steps after it is a fresh process's.
WARMUP_SIGN = 3.0
# Steps listed by number in one event line.
MAX_LISTED = 10


class InputError(Exception):
    """One line naming the file (and line) that cannot be read."""


# ----------------------------------------------------------------------------
# Small helpers.

def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def finite(v):
    return is_num(v) and math.isfinite(v)


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return None
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def lower_median(xs):
    s = sorted(xs)
    return s[(len(s) - 1) // 2] if s else None


def fmt_ms(ms):
    if ms >= 1000:
        return "%.2f s" % (ms / 1000.0)
    if ms >= 100:
        return "%.0f ms" % ms
    if ms >= 1:
        return "%.1f ms" % ms
    return "%.3g ms" % ms


def fmt_s(s):
    return "%.1f s" % s if s < 600 else "%.0f s (%s)" % (s, hms(s))


def hms(s):
    s = int(round(s))
    return "%d:%02d:%02d" % (s // 3600, s // 60 % 60, s % 60)


def fmt_loss(v):
    if v is None:
        return "null"
    if not math.isfinite(v):
        return str(v)
    return "%.4g" % v


def fmt_ratio(r):
    return "%.1fx" % r if r < 100 else "%.0fx" % r


def step_list(steps):
    shown = ", ".join(str(s) for s in steps[:MAX_LISTED])
    if len(steps) > MAX_LISTED:
        shown += ", ..."
    return shown


def step_range(a, b):
    return "step %d" % a if a == b else "steps %d-%d" % (a, b)


# ----------------------------------------------------------------------------
# Reading.

# Known metrics fields and what they hold; other keys are ignored.
NUMBER_FIELDS = ("loss", "lr", "grad_norm", "samples_per_s", "step_ms", "time",
                 "loss_scale", "eval_loss", "eval_accuracy", "rss_mib",
                 "peak_mib", "cpu_util", "comm_mb")
MAX_STEP = 2 ** 53


def check_regular(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError("%s: no such file or directory" % path)
    except OSError as e:
        raise InputError("%s: %s" % (path, e.strerror or e))
    return st


def open_text(path):
    st = check_regular(path)
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else
                "a directory" if stat.S_ISDIR(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "not a plain file")
        raise InputError("%s: not a regular file (%s)" % (path, kind))
    try:
        return open(path, "r", encoding="utf-8", errors="replace", newline="")
    except OSError as e:
        raise InputError("%s: %s" % (path, e.strerror or e))


def read_lines(path):
    """The file's lines (without their newline) and whether the last one
    ended with a newline."""
    with open_text(path) as f:
        try:
            text = f.read()
        except OSError as e:
            raise InputError("%s: %s" % (path, e.strerror or e))
    if "\x00" in text[:4096]:
        raise InputError("%s: a binary file, not metrics (JSON lines) nor a log" % path)
    lines = text.split("\n")
    complete = True
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        complete = False
    return [l.rstrip("\r") for l in lines], complete


def parse_metrics(path, lines, complete, notes):
    rows = []
    for i, line in enumerate(lines):
        lineno = i + 1
        text = line.strip()
        if not text:
            continue
        try:
            rec = json.loads(text)
        except (ValueError, RecursionError) as e:
            if i == len(lines) - 1 and not complete:
                # A line cut off by a kill: the executable itself drops it on
                # --resume.
                notes.append("line %d is cut off (no newline at the end of the "
                             "file): ignored" % lineno)
                continue
            reason = e.msg if isinstance(e, json.JSONDecodeError) else "too deeply nested"
            raise InputError("%s:%d: not JSON (%s)" % (path, lineno, reason))
        if not isinstance(rec, dict):
            raise InputError("%s:%d: not a JSON object (each line is "
                             "{\"step\": s, \"loss\": L, ...})" % (path, lineno))
        if "step" not in rec:
            raise InputError("%s:%d: no \"step\" in the row" % (path, lineno))
        step = rec["step"]
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < MAX_STEP:
            raise InputError("%s:%d: \"step\" is %s, not an integer in [0, 2^53)"
                             % (path, lineno, short(step)))
        row = {"step": step, "line": lineno}
        for k in NUMBER_FIELDS:
            if k in rec:
                v = rec[k]
                if v is not None and not is_num(v):
                    raise InputError("%s:%d: \"%s\" is %s, not a number or null"
                                     % (path, lineno, k, short(v)))
                row[k] = None if v is None else to_float(v)
        if "epoch" in rec:
            v = rec["epoch"]
            if v is not None and not is_num(v):
                raise InputError("%s:%d: \"epoch\" is %s, not a number"
                                 % (path, lineno, short(v)))
            row["epoch"] = None if v is None else to_float(v)
        if "skipped" in rec:
            v = rec["skipped"]
            if v is not None and not isinstance(v, bool):
                raise InputError("%s:%d: \"skipped\" is %s, not true or false"
                                 % (path, lineno, short(v)))
            row["skipped"] = bool(v)
        if "alerts" in rec:
            v = rec["alerts"]
            if v is not None and not (isinstance(v, list) and
                                      all(isinstance(a, str) for a in v)):
                raise InputError("%s:%d: \"alerts\" is %s, not a list of names"
                                 % (path, lineno, short(v)))
            row["alerts"] = v or []
        rows.append(row)
    return rows


def to_float(v):
    try:
        return float(v)
    except OverflowError:  # an integer beyond a double's range
        return math.inf if v > 0 else -math.inf


def short(v):
    s = json.dumps(v) if not isinstance(v, float) or math.isfinite(v) else str(v)
    return s if len(s) <= 40 else s[:37] + "..."


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)"
RE_HEAD = re.compile(r"^(\S+): (.+?): (\d{1,18}) samples, batch (\d{1,18})")
RE_RESUMED = re.compile(r"; resumed from (.+) at step (\d{1,18})\s*$")
RE_STEP = re.compile(r"^step (\d{1,18})/(\d{1,18})\s+loss " + NUM + r"\s+lr " + NUM +
                     r"(?:\s+grad-norm " + NUM + r")?(?:\s+scale " + NUM +
                     r"( \(skipped\))?)?\s+" + NUM + r" samples/s")
RE_EVAL_AT = re.compile(r"^eval \(step (\d{1,18})\): loss " + NUM +
                        r"(?:\s+accuracy " + NUM + r")?")
RE_EVAL_END = re.compile(r"^eval: loss " + NUM + r"(?:\s+accuracy " + NUM + r")?")
RE_INTERRUPT = re.compile(r"^(interrupted|terminated) after step (\d{1,18})/(\d{1,18})")
RE_WARNING = re.compile(r"(?:^|: )warning: (.*)$")
RE_WARN_STEP = re.compile(r"\(step (\d{1,18})\)")
RE_NONFINITE = re.compile(r"^\S+: step (\d{1,18}): loss is (NaN|infinite)(.*)$")
RE_COLLAPSE = re.compile(r"^\S+: step (\d{1,18}): (the loss scale fell to .*)$")
RE_LAUNCH_RESTART = re.compile(r"^kiln-launch: (attempt \d+.* failed \(.*\) after [\d.]+ s); "
                               r"restarting from (?:the checkpoint at step (\d{1,18})|the start)")
RE_LAUNCH_GIVEUP = re.compile(r"^kiln-launch: (attempt \d+.*giving up.*)$")
RE_CHECKPOINT = re.compile(r"^checkpoint: (.+)$")


def num(s):
    return float(s) if s is not None else None


def parse_log(path, lines):
    """What a run's stdout (and stderr) says: step lines, restarts, evals,
    warnings, interruptions, the errors that stop a run."""
    log = {"path": path, "rows": [], "batch": None, "resumed": [], "launch": [],
           "warnings": [], "interrupts": [], "nonfinite": [], "collapse": [],
           "giveup": [], "evals": [], "final_eval": None, "checkpoints": 0,
           "recognized": 0}
    for i, raw in enumerate(lines):
        line = ANSI.sub("", raw).split("\r")[-1].strip()
        if not line:
            continue
        lineno = i + 1
        m = RE_STEP.match(line)
        if m and int(m.group(1)) >= 1:
            log["recognized"] += 1
            row = {"step": int(m.group(1)) - 1, "line": lineno, "loss": num(m.group(3)),
                   "lr": num(m.group(4)), "samples_per_s": num(m.group(8))}
            if m.group(5) is not None:
                row["grad_norm"] = num(m.group(5))
            if m.group(6) is not None:
                row["loss_scale"] = num(m.group(6))
                row["skipped"] = m.group(7) is not None
            log["rows"].append(row)
            continue
        m = RE_HEAD.match(line)
        if m:
            log["recognized"] += 1
            log["batch"] = int(m.group(4))
            r = RE_RESUMED.search(line)
            if r:
                log["resumed"].append((int(r.group(2)), r.group(1), lineno))
            continue
        m = RE_EVAL_AT.match(line)
        if m and int(m.group(1)) >= 1:
            log["recognized"] += 1
            log["evals"].append((int(m.group(1)) - 1, num(m.group(2)), num(m.group(3))))
            continue
        m = RE_EVAL_END.match(line)
        if m:
            log["recognized"] += 1
            log["final_eval"] = (num(m.group(1)), num(m.group(2)))
            continue
        m = RE_INTERRUPT.match(line)
        if m and int(m.group(2)) >= 1:
            log["recognized"] += 1
            log["interrupts"].append((int(m.group(2)) - 1, line, lineno))
            continue
        m = RE_NONFINITE.match(line)
        if m:
            log["recognized"] += 1
            log["nonfinite"].append((int(m.group(1)), line.split(": ", 1)[1]))
            continue
        m = RE_COLLAPSE.match(line)
        if m:
            log["recognized"] += 1
            log["collapse"].append((int(m.group(1)), m.group(2)))
            continue
        m = RE_LAUNCH_RESTART.match(line)
        if m:
            log["recognized"] += 1
            at = int(m.group(2)) if m.group(2) is not None else 0
            log["launch"].append((at, m.group(1)))
            continue
        m = RE_LAUNCH_GIVEUP.match(line)
        if m:
            log["recognized"] += 1
            log["giveup"].append(m.group(1))
            continue
        if RE_CHECKPOINT.match(line):
            log["recognized"] += 1
            log["checkpoints"] += 1
            continue
        m = RE_WARNING.search(line)
        if m:
            log["recognized"] += 1
            s = RE_WARN_STEP.search(m.group(1))
            text = m.group(1)
            if s and text.endswith(s.group(0)):
                text = text[:-len(s.group(0))].rstrip()
            log["warnings"].append((int(s.group(1)) if s else None, text))
            continue
        if line.startswith("kiln-launch: "):
            log["recognized"] += 1
    return log


def is_metrics(lines):
    for line in lines:
        t = line.strip()
        if t:
            return t.startswith("{")
    return True  # an empty file: an empty metrics file


class Run:
    def __init__(self, name, path):
        self.name = name
        self.path = path
        self.metrics = None
        self.logs = []
        self.rows = []          # metrics rows, file order
        self.from_log = False   # rows are the log's step lines (every --log-every)
        self.notes = []
        self.log = None         # the merged log


def load_run(arg):
    name = None
    path = arg
    m = re.match(r"^([^=/]+)=(.+)$", arg)
    if m and not os.path.exists(arg):
        name, path = m.group(1), m.group(2)
    st = check_regular(path)
    run = Run(name, path)
    if stat.S_ISDIR(st.st_mode):
        metrics = os.path.join(path, "metrics.jsonl")
        if not os.path.exists(metrics):
            found = sorted(glob.glob(os.path.join(glob.escape(path), "*.jsonl")))
            if len(found) > 1:
                raise InputError("%s: no metrics.jsonl, and %d *.jsonl files: name one"
                                 % (path, len(found)))
            metrics = found[0] if found else None
        logs = sorted(glob.glob(os.path.join(glob.escape(path), "*.log")) +
                      glob.glob(os.path.join(glob.escape(path), "*.out")))
        if metrics is None and not logs:
            raise InputError("%s: no metrics.jsonl, *.jsonl or *.log in the directory" % path)
        run.metrics = metrics
        run.logs = logs
        if name is None:
            run.name = os.path.basename(os.path.normpath(path)) or path
    else:
        lines, complete = read_lines(path)
        if is_metrics(lines):
            run.metrics = path
            run._lines = (lines, complete)
        else:
            run.logs = [path]
            run._loglines = {path: lines}
        if name is None:
            base = os.path.basename(path)
            stem = os.path.splitext(base)[0]
            if stem == "metrics":
                stem = os.path.basename(os.path.dirname(os.path.abspath(path))) or stem
            run.name = stem
    if run.metrics:
        lines, complete = getattr(run, "_lines", None) or read_lines(run.metrics)
        run.rows = parse_metrics(run.metrics, lines, complete, run.notes)
    merged = None
    for lp in run.logs:
        lines = getattr(run, "_loglines", {}).get(lp)
        if lines is None:
            lines, _ = read_lines(lp)
        log = parse_log(lp, lines)
        if log["recognized"] == 0 and not run.metrics:
            raise InputError("%s: neither a metrics file (JSON lines) nor a kiln-train "
                             "log (no step, eval or kiln-train lines)" % lp)
        if merged is None:
            merged = log
        else:
            for k, v in log.items():
                if isinstance(v, list):
                    merged[k].extend(v)
            merged["batch"] = merged["batch"] or log["batch"]
            merged["final_eval"] = log["final_eval"] or merged["final_eval"]
            merged["checkpoints"] += log["checkpoints"]
    run.log = merged
    if not run.metrics and merged is not None:
        run.rows = merged["rows"]
        run.from_log = True
    return run


# ----------------------------------------------------------------------------
# Analysis.

class Event:
    def __init__(self, kind, step, message, last_step=None, **extra):
        self.kind = kind
        self.step = step
        self.last_step = step if last_step is None else last_step
        self.message = message
        self.extra = extra

    def to_json(self):
        d = {"kind": self.kind, "step": self.step, "last_step": self.last_step,
             "message": self.message}
        d.update(self.extra)
        return d


def median_filter(xs, width):
    h = width // 2
    n = len(xs)
    out = []
    for i in range(n):
        out.append(median(xs[max(0, i - h):min(n, i + h + 1)]))
    return out


def change_points(x, raw, min_len, log_factor):
    """Split points of the log step times x (median-filtered; raw: the
    unfiltered ones): binary segmentation with a squared-error cost, a split
    kept when the medians of the min_len steps on each side differ by at least
    log_factor (in log)."""
    n = len(x)
    s1 = [0.0] * (n + 1)
    s2 = [0.0] * (n + 1)
    for i, v in enumerate(x):
        s1[i + 1] = s1[i] + v
        s2[i + 1] = s2[i] + v * v

    def sse(a, b):
        m = b - a
        d = s1[b] - s1[a]
        return s2[b] - s2[a] - d * d / m

    splits = []
    stack = [(0, n)]
    while stack:
        a, b = stack.pop()
        if b - a < 2 * min_len:
            continue
        best, at = None, None
        for t in range(a + min_len, b - min_len + 1):
            c = sse(a, t) + sse(t, b)
            if best is None or c < best:
                best, at = c, t
        # The filter can move an edge by a step or two: place it where the
        # raw values near it change level, each level the median of the
        # min_len steps beyond the filter's reach on its side.
        h = FILTER_WIDTH
        lev_l = median(raw[max(a, at - h - min_len):max(a + 1, at - h)])
        lev_r = median(raw[min(b - 1, at + h):min(b, at + h + min_len)])
        lo_t, hi_t = max(a + min_len, at - h), min(b - min_len, at + h)
        costs = [(t, sum(abs(v - lev_l) for v in raw[lo_t - 1:t]) +
                  sum(abs(v - lev_r) for v in raw[t:hi_t + 1]))
                 for t in range(lo_t, hi_t + 1)]
        if costs:
            # Near-ties go to the later step: a lone slow step just before
            # the change is a hiccup, not its start.
            best_c = min(c for _, c in costs)
            at = max(t for t, c in costs if c <= best_c + 0.25 * abs(lev_r - lev_l))
        left = median(raw[max(a, at - min_len):at])
        right = median(raw[at:min(b, at + min_len)])
        if abs(right - left) >= log_factor:
            splits.append(at)
            stack.append((a, at))
            stack.append((at, b))
    return sorted(splits)


def analyze(run, opts):
    events = []
    notes = run.notes
    log = run.log or {}
    rows = run.rows

    # Order: steps going backwards or repeated (logs concatenated, a resume
    # that did not truncate the file) are a restart; the row written last for
    # a step is the one that stands, as --resume itself keeps.
    restarts = {}   # step -> {"details": [...], "repeated": [a, b] or None, "extra": {...}}

    def restart(step, detail, **extra):
        r = restarts.setdefault(step, {"details": [], "repeated": None, "extra": {}})
        if detail and detail not in r["details"]:
            r["details"].append(detail)
        r["extra"].update(extra)
        return r

    by_step = {}
    prev_max = None
    last = None
    for row in rows:
        s = row["step"]
        if last is not None and s <= last:
            # The steps go back: a new attempt from step s, which repeats
            # the steps up to the furthest one seen.
            if run.from_log:
                restart(s, "the log's steps go back to %d" % s)
            else:
                r = restart(s, None)
                r["repeated"] = [s, max(prev_max, (r["repeated"] or [s, s])[1])]
        by_step[s] = row
        last = s
        prev_max = s if prev_max is None else max(prev_max, s)
    series = [by_step[s] for s in sorted(by_step)]
    steps = [r["step"] for r in series]
    index = {s: i for i, s in enumerate(steps)}
    n = len(series)

    summary = {"rows": len(rows), "steps": n}
    if n == 0:
        notes.append("no steps recorded")
    else:
        summary["first_step"] = steps[0]
        summary["last_step"] = steps[-1]
        epochs = [r["epoch"] for r in series if finite(r.get("epoch"))]
        if epochs:
            summary["epochs"] = [min(epochs), max(epochs)]

    # Missing steps (metrics have every step; a log only every --log-every).
    if not run.from_log:
        for a, b in zip(steps, steps[1:]):
            if b > a + 1:
                events.append(Event("missing-steps", a + 1,
                                    "%s missing (no metrics rows)" % step_range(a + 1, b - 1),
                                    last_step=b - 1))

    # The log's restarts.
    for at, frm, _ in log.get("resumed", []):
        restart(at, "the log: resumed from %s" % frm)
    for at, what in log.get("launch", []):
        restart(at, "kiln-launch: %s" % what)

    # --- Loss.
    losses = [(r["step"], r["loss"]) for r in series if "loss" in r]
    fin = [(s, v) for s, v in losses if v is not None and math.isfinite(v)]
    bad = [s for s, v in losses if v is None or not math.isfinite(v)]
    if fin:
        summary["loss"] = {"first": fin[0][1], "first_step": fin[0][0],
                           "last": fin[-1][1], "last_step": fin[-1][0]}
    stopped = {s: text for s, text in log.get("nonfinite", [])}
    if bad or stopped:
        first = min(bad + list(stopped))
        msg = "step %d: loss is not finite (first non-finite loss" % first
        if len(bad) > 1:
            msg += "; %d non-finite losses in all, the last at step %d" % (len(bad), bad[-1])
        row = by_step.get(first)
        if row is not None and row.get("skipped"):
            msg += "; a skipped step"
        if first in stopped:
            msg += "; the run stopped: %s" % stopped[first]
        elif first == (steps[-1] if steps else None):
            msg += "; the run's last step"
        msg += ")"
        events.append(Event("non-finite-loss", first, msg, last_step=(bad or [first])[-1],
                            count=max(len(bad), 1), steps=bad[:1000]))

    events.extend(loss_spikes(fin, opts.spike_factor))
    events.extend(loss_rising(fin, min(RISING_FACTOR, opts.spike_factor)))

    # --- Step times: step_ms, else the batch over samples/s, else the wall
    # time between rows.
    batch = log.get("batch")
    st = []
    for i, r in enumerate(series):
        v = r.get("step_ms")
        if not finite(v) or v <= 0:
            v = None
            sps = r.get("samples_per_s")
            if batch and finite(sps) and sps > 0:
                v = batch * 1000.0 / sps
        st.append(v)
    has_ms = any(v is not None for v in st)
    times = [r.get("time") if finite(r.get("time")) else None for r in series]
    has_time = sum(t is not None for t in times) >= 2
    if not has_ms and has_time and not run.from_log:
        for i in range(1, n):
            if times[i] is not None and times[i - 1] is not None and times[i] > times[i - 1]:
                if steps[i] == steps[i - 1] + 1:
                    st[i] = (times[i] - times[i - 1]) * 1000.0
        has_ms = any(v is not None for v in st)
        derived_ms = True
    else:
        derived_ms = False
    if not has_ms and not run.from_log and n:
        notes.append("no step times (step_ms, samples_per_s, time): throughput not analyzed")

    def local_median(i, after_only=False, w=50):
        lo = i + WARMUP_STEPS if after_only else max(0, i - w)
        hi = min(n, (i + WARMUP_STEPS + w) if after_only else i + w + 1)
        vals = [st[j] for j in range(lo, hi) if j != i and st[j] is not None]
        return median(vals)

    # --- Restarts and stalls in wall time: the time between two rows that
    # the step itself does not account for (evals, checkpoints, a process
    # that died and was started again).
    def add_gap(s, g):
        d = "wall-time gap of %s before it" % fmt_s(g)
        r = restart(s, None, gap_s=round(g, 3))
        r["details"].insert(0, d)

    def add_fresh(s, ms, after):
        restart(s, "its first step took %s, %s the steps after it, as a fresh "
                   "process's" % (fmt_ms(ms), fmt_ratio(ms / after)))

    if has_time and not run.from_log:
        idle = {}
        for i in range(1, n):
            if times[i] is None or times[i - 1] is None:
                continue
            dt = times[i] - times[i - 1]
            if dt < 0:
                continue
            own = st[i] / 1000.0 if (st[i] is not None and not derived_ms) else 0.0
            idle[i] = max(0.0, dt - own)
        med_all = median([v for v in st if v is not None]) if has_ms else None
        med_s = (med_all or 0.0) / 1000.0
        # The pauses a run makes on its own (evals, checkpoints) recur: the
        # lower median of the notable ones of each kind is that kind's cost.
        notable = max(3 * med_s, 0.02)

        def near_eval(i):
            return ("eval_loss" in series[i]) or ("eval_loss" in series[i - 1])
        pauses = {True: [], False: []}
        for i, g in idle.items():
            if g > notable:
                pauses[near_eval(i)].append(g)
        typical = {k: (lower_median(v) if len(v) >= 2 else 0.0) for k, v in pauses.items()}
        for i, g in sorted(idle.items()):
            s = steps[i]
            after = local_median(i, after_only=True)
            fresh = (st[i] is not None and after is not None and not derived_ms
                     and st[i] >= WARMUP_SIGN * after)
            if s in restarts:
                # A restart the log or repeated steps show: the gap says how
                # long the run stood still.
                if g > notable:
                    add_gap(s, g)
                if fresh:
                    add_fresh(s, st[i], after)
                continue
            if g < MIN_GAP_S:
                continue
            lm = local_median(i)
            lm_s = (lm or med_all or 0.0) / 1000.0
            if g <= opts.gap_factor * lm_s:
                continue
            if fresh:
                add_gap(s, g)
                add_fresh(s, st[i], after)
            elif g > opts.gap_factor * typical[near_eval(i)]:
                base = typical[near_eval(i)]
                if base > 0:
                    what = "%s the run's usual pause for %s; " % (
                        fmt_ratio(g / base), "evals" if near_eval(i) else "checkpoints")
                elif lm_s > 0:
                    what = "%s the median step time; " % fmt_ratio(g / lm_s)
                else:
                    what = ""
                events.append(Event(
                    "gap", s, "step %d: wall-time gap of %s before it (%sa stall "
                    "between steps, or a restart)" % (s, fmt_s(g), what), gap_s=round(g, 3)))
        if times[0] is not None and times[-1] is not None:
            first_ms = st[0] if (st[0] is not None and not derived_ms) else 0.0
            summary["wall_s"] = round(times[-1] - times[0] + first_ms / 1000.0, 3)
            summary["wall_from"] = "time"
    elif has_ms and not run.from_log and not derived_ms:
        summary["wall_s"] = round(sum(v for v in st if v is not None) / 1000.0, 3)
        summary["wall_from"] = "step_ms"

    # Process starts: the first step and each restart; their first steps are
    # a warm-up. A slow first step without wall times is the only sign of a
    # restart left (reported as a stall unless the log says more).
    starts = sorted(set([steps[0]] if steps else []) | set(restarts))
    warm = set()
    for a in starts:
        i = index.get(a)
        if i is None:
            # The restart step itself is not in the metrics: warm up from the
            # next step present.
            later = [j for j, s in enumerate(steps) if s > a]
            i = later[0] if later else None
        if i is not None:
            warm.update(range(i, min(n, i + WARMUP_STEPS)))

    # --- Throughput: change points of the log step time.
    keep = [i for i in range(n) if st[i] is not None and i not in warm]
    seg_of = {}
    if keep:
        raw = [math.log(st[i]) for i in keep]
        splits = []
        if len(keep) >= 2 * MIN_SEGMENT:
            filt = median_filter(raw, FILTER_WIDTH)
            splits = change_points(filt, raw, MIN_SEGMENT, math.log(opts.slowdown_factor))
        bounds = [0] + splits + [len(keep)]
        segs = []
        for a, b in zip(bounds, bounds[1:]):
            idx = keep[a:b]
            seg = {"first": steps[idx[0]], "last": steps[idx[-1]], "n": len(idx),
                   "ms": median([st[i] for i in idx]),
                   "sps": median([series[i]["samples_per_s"] for i in idx
                                  if finite(series[i].get("samples_per_s"))])}
            for i in idx:
                seg_of[i] = seg
            segs.append(seg)
        for prev, seg, nxt in zip(segs, segs[1:], segs[2:] + [None]):
            r = seg["ms"] / prev["ms"]
            if r < opts.slowdown_factor or \
                    (seg["ms"] - prev["ms"]) * seg["n"] < 1000 * MIN_DROP_COST_S:
                continue
            last = (nxt["first"] - 1) if nxt else steps[-1]
            unit = "step time" if not derived_ms else "time between steps"
            msg = "%s: throughput %s lower than before (%s %s vs %s median" % (
                step_range(seg["first"], last), fmt_ratio(r), unit, fmt_ms(seg["ms"]),
                fmt_ms(prev["ms"]))
            if seg["sps"] is not None and prev["sps"] is not None:
                msg += "; %.0f vs %.0f samples/s" % (seg["sps"], prev["sps"])
            if nxt and nxt["ms"] * opts.slowdown_factor <= seg["ms"]:
                msg += "; back to %s from step %d" % (fmt_ms(nxt["ms"]), nxt["first"])
            msg += ")"
            events.append(Event("throughput-drop", seg["first"], msg, last_step=last,
                                ratio=round(r, 3), step_ms=round(seg["ms"], 4),
                                before_ms=round(prev["ms"], 4)))
        # The run's steady speed: the longest segment's.
        longest = max(segs, key=lambda g: g["last"] - g["first"])
        summary["median_step_ms"] = round(longest["ms"], 4)
        if longest["sps"] is not None:
            summary["samples_per_s"] = round(longest["sps"], 1)

    # --- Stalls: one step far slower than its segment's median (the warm-up
    # steps of each process start aside).
    if not run.from_log and not derived_ms:
        stalls = []
        first_ms = st[0] if n else None
        for i in range(n):
            if st[i] is None or i in warm or i not in seg_of:
                continue
            ref = seg_of[i]["ms"]
            if ref and st[i] > opts.gap_factor * ref and st[i] - ref >= 1000 * MIN_STALL_S:
                stalls.append((steps[i], st[i], ref))
        if stalls:
            worst = max(stalls, key=lambda t: t[1] / t[2])
            if len(stalls) == 1:
                s, v, ref = stalls[0]
                msg = "step %d: stall (the step took %s, %s the median %s" % (
                    s, fmt_ms(v), fmt_ratio(v / ref), fmt_ms(ref))
                if first_ms and 0.5 * first_ms <= v <= 2 * first_ms and not has_time:
                    msg += "; as slow as the run's first step: a restart? (no wall " \
                           "times to tell)"
                msg += ")"
            else:
                msg = "steps %s: stalls (the slowest, step %d, took %s, %s the median %s), " \
                      "%d in all" % (step_list([t[0] for t in stalls]), worst[0],
                                     fmt_ms(worst[1]), fmt_ratio(worst[1] / worst[2]),
                                     fmt_ms(worst[2]), len(stalls))
            events.append(Event("stall", stalls[0][0], msg, last_step=stalls[-1][0],
                                steps=[t[0] for t in stalls][:1000],
                                worst_ms=round(worst[1], 3)))

    # --- Restart events (merged: repeated steps, gaps, the log).
    for s in sorted(restarts):
        r = restarts[s]
        details = r["details"]
        if r["repeated"]:
            a, b = r["repeated"]
            msg = "%s repeated (restart from a checkpoint at step %d%s)" % (
                "step %d" % a if a == b else "steps %d-%d" % (a, b), a,
                "".join("; " + d for d in details))
            events.append(Event("restart", s, msg, repeated=[a, b], **r["extra"]))
        else:
            msg = "step %d: restart (%s)" % (s, "; ".join(details) if details else "")
            events.append(Event("restart", s, msg, **r["extra"]))

    # --- Skipped steps (loss scaling).
    skipped = [r["step"] for r in series if r.get("skipped")]
    if skipped:
        scales = [r["loss_scale"] for r in series if finite(r.get("loss_scale"))]
        what = "skipped (non-finite gradients)"
        if len(skipped) == 1:
            msg = "step %d: %s" % (skipped[0], what)
        else:
            msg = "steps %s: %s, %d in all" % (step_list(skipped), what, len(skipped))
        if scales and scales[0] != scales[-1]:
            msg += "; loss scale %g at the start, %g at the end" % (scales[0], scales[-1])
        events.append(Event("skipped", skipped[0], msg, last_step=skipped[-1],
                            count=len(skipped), steps=skipped[:1000]))
    for s, text in log.get("collapse", []):
        events.append(Event("loss-scale-collapse", s, "step %d: %s" % (s, text)))

    # --- The log's own reports.
    for s, line, _ in log.get("interrupts", []):
        events.append(Event("interrupted", s, "step %d: %s (the log: %s)" % (
            s, line.split(" ", 1)[0], line)))
    seen = {}
    for s, text in log.get("warnings", []):
        seen.setdefault((s, text), 0)
        seen[(s, text)] += 1
    for (s, text), count in seen.items():
        times_ = " (%d times)" % count if count > 1 else ""
        events.append(Event("warning", s, ("step %d: " % s if s is not None else "")
                            + "warning: " + text + times_, count=count))
    for text in log.get("giveup", []):
        events.append(Event("error", None, "kiln-launch: " + text))

    # --- The run's own --alert warnings, as its metrics name them (the
    # log's warning line, when there is one, says more).
    warned = {s for s, _ in log.get("warnings", [])}
    alerts = {}
    for r in series:
        for a in r.get("alerts") or []:
            if r["step"] in warned:
                continue
            # An alert on a step kiln-logs reports anyway is said there.
            same = [e for e in events if e.kind in ALERT_KINDS.get(a, ())
                    and (e.step == r["step"] or r["step"] in e.extra.get("steps", ()))]
            if same:
                e = same[0]
                note = "the run's --alert '%s' fired too" % a
                if note not in e.message:
                    e.message = (e.message[:-1] + "; " + note + ")" if e.message.endswith(")")
                                 else e.message + " (" + note + ")")
                continue
            alerts.setdefault(a, []).append(r["step"])
    for a, at in sorted(alerts.items(), key=lambda kv: kv[1][0]):
        what = "alert '%s' (the run's --alert)" % a
        msg = ("step %d: %s" % (at[0], what) if len(at) == 1 else
               "steps %s: %s, %d in all" % (step_list(at), what, len(at)))
        events.append(Event("alert", at[0], msg, last_step=at[-1], alert=a,
                            steps=at[:1000]))

    # --- Memory and CPU, when the run sampled them.
    mem = [r.get("peak_mib") if finite(r.get("peak_mib")) else r.get("rss_mib")
           for r in series]
    mem = [m for m in mem if finite(m)]
    if mem:
        summary["memory_mib"] = max(mem)
    cpu = [r["cpu_util"] for r in series if finite(r.get("cpu_util"))]
    if cpu:
        summary["cpu_util"] = round(median(cpu), 3)

    # --- Evals.
    evals = [(r["step"], r["eval_loss"], r.get("eval_accuracy")) for r in series
             if finite(r.get("eval_loss"))]
    if not evals:
        evals = [e for e in log.get("evals", []) if finite(e[1])]
    if evals:
        best = min(evals, key=lambda e: e[1])
        summary["best_eval"] = {"step": best[0], "loss": best[1], "accuracy": best[2]}
        summary["evals"] = len(evals)
    if log.get("final_eval") and finite(log["final_eval"][0]):
        summary["final_eval"] = {"loss": log["final_eval"][0],
                                 "accuracy": log["final_eval"][1]}
    if run.from_log:
        notes.append("no metrics file: read from the log's step lines (every --log-every "
                     "steps); no stall or wall-time analysis")

    events.sort(key=lambda e: (e.step is None, e.step if e.step is not None else 0,
                               KIND_ORDER.get(e.kind, 99)))
    run.summary = summary
    run.events = events
    run.series = series
    run.restart_steps = sorted(restarts)


# The run's own --alert names and the events of kiln-logs that say the same.
ALERT_KINDS = {"nan": ("non-finite-loss",), "loss-spike": ("loss-spike",),
               "step-time": ("stall", "restart")}

KIND_ORDER = {"restart": 0, "gap": 1, "missing-steps": 2, "interrupted": 3,
              "non-finite-loss": 4, "loss-spike": 5, "loss-rising": 6,
              "throughput-drop": 7, "stall": 8, "skipped": 9,
              "loss-scale-collapse": 10, "warning": 11, "alert": 12, "error": 13}


def loss_spikes(fin, factor):
    """A loss above factor x the median of the previous SPIKE_WINDOW finite
    losses that also stands SPIKE_MADS robust deviations above it: the
    deviation of the log-loss from step to step over the previous
    SPIKE_NOISE_WINDOW losses (1.4826 x the median absolute deviation of the
    differences, over sqrt 2), which a falling loss curve does not inflate."""
    hits = []
    logs = [math.log(v) if v > 0 else None for _, v in fin]
    diffs = [None] + [b - a if a is not None and b is not None else None
                      for a, b in zip(logs, logs[1:])]
    for i in range(SPIKE_MIN_HISTORY, len(fin)):
        s, v = fin[i]
        win = [x for _, x in fin[max(0, i - SPIKE_WINDOW):i]]
        lo = min(win)
        if lo > 0 and v < factor * lo:
            continue  # below factor x the window's smallest: no spike
        med = median(win)
        if med > 0 and lo > 0 and v > 0:
            d = [x for x in diffs[max(1, i - SPIKE_NOISE_WINDOW):i] if x is not None]
            dm = median(d)
            sigma = 1.4826 * median([abs(x - dm) for x in d]) / math.sqrt(2)
            if v >= factor * med and math.log(v / med) >= SPIKE_MADS * sigma:
                hits.append((s, v, med))
        else:
            sigma = 1.4826 * median([abs(x - med) for x in win])
            if (med <= 0 or v >= factor * med) and v - med >= SPIKE_MADS * max(sigma, 1e-12):
                hits.append((s, v, med))
    events = []
    groups = []
    for h in hits:
        if groups and h[0] - groups[-1][-1][0] <= 2:
            groups[-1].append(h)
        else:
            groups.append([h])
    for g in groups:
        top = max(g, key=lambda h: h[1] / h[2] if h[2] > 0 else h[1] - h[2])
        s, v, med = top
        rel = ("%s the running median %s" % (fmt_ratio(v / med), fmt_loss(med)) if med > 0
               else "%s above the running median %s" % (fmt_loss(v - med), fmt_loss(med)))
        if len(g) == 1:
            msg = "step %d: loss spike (%s, %s)" % (s, fmt_loss(v), rel)
        else:
            msg = "steps %d-%d: loss spike (%d steps; the highest, step %d: %s, %s)" % (
                g[0][0], g[-1][0], len(g), s, fmt_loss(v), rel)
        events.append(Event("loss-spike", g[0][0], msg, last_step=g[-1][0],
                            loss=v, running_median=med,
                            ratio=round(v / med, 3) if med > 0 else None))
    return events


def loss_rising(fin, factor):
    """The loss rising for good: the median of each block of SPIKE_WINDOW
    losses against the best block before it; reported when every block from
    one on stays above factor x that best (the run ends diverged)."""
    if len(fin) < 3 * SPIKE_WINDOW:
        return []
    blocks = []
    for a in range(0, len(fin) - SPIKE_WINDOW + 1, SPIKE_WINDOW):
        chunk = fin[a:a + SPIKE_WINDOW]
        blocks.append((chunk[0][0], chunk[-1][0], median([v for _, v in chunk])))
    best = None
    first_bad = None
    for j, (a, b, m) in enumerate(blocks):
        if best is not None and best[2] > 0 and m >= factor * best[2] and \
                m - best[2] >= RISING_PROGRESS * (blocks[0][2] - best[2]):
            if first_bad is None:
                first_bad = (j, best)
        else:
            first_bad = None
            if best is None or m < best[2]:
                best = (a, b, m)
    if first_bad is None:
        return []
    j, bst = first_bad
    last = blocks[-1]
    # From the best block on: where the loss turned.
    start = next(s for s, _ in fin if s > bst[1])
    msg = ("%s: loss rising (median %s over steps %d-%d, %s its best, %s over steps %d-%d; "
           "above %s from step %d)") % (
        step_range(start, fin[-1][0]), fmt_loss(last[2]), last[0], last[1],
        fmt_ratio(last[2] / bst[2]), fmt_loss(bst[2]), bst[0], bst[1],
        fmt_ratio(factor), blocks[j][0])
    return [Event("loss-rising", start, msg, last_step=fin[-1][0],
                  ratio=round(last[2] / bst[2], 3), above_from=blocks[j][0])]


# ----------------------------------------------------------------------------
# Report.

def text_report(runs, out):
    for k, run in enumerate(runs):
        if k:
            out.write("\n")
        srcs = [p for p in [run.metrics] + run.logs if p]
        out.write("%s: %s\n" % (run.name, ", ".join(srcs)))
        s = run.summary
        if s["steps"]:
            line = "steps %d-%d (%d steps" % (s["first_step"], s["last_step"], s["steps"])
            if s["rows"] != s["steps"]:
                line += ", %d rows" % s["rows"]
            if "epochs" in s:
                e0, e1 = s["epochs"]
                line += ", epoch %d" % e0 if e0 == e1 else ", epochs %d-%d" % (e0, e1)
            line += ")"
            if "wall_s" in s:
                line += ", %s %s" % ("wall time" if s["wall_from"] == "time" else
                                     "compute time (no wall times recorded)",
                                     fmt_s(s["wall_s"]))
            if "median_step_ms" in s:
                line += ", step time %s" % fmt_ms(s["median_step_ms"])
                if "samples_per_s" in s:
                    line += " (%.0f samples/s)" % s["samples_per_s"]
            if "memory_mib" in s:
                line += ", memory up to %.0f MiB" % s["memory_mib"]
            if "cpu_util" in s:
                line += ", cpu %.0f%%" % (100 * s["cpu_util"])
            out.write("  " + line + "\n")
        parts = []
        if "loss" in s:
            l = s["loss"]
            parts.append("loss %s (step %d) -> %s (step %d)" % (
                fmt_loss(l["first"]), l["first_step"], fmt_loss(l["last"]), l["last_step"]))
        if "best_eval" in s:
            b = s["best_eval"]
            t = "best eval loss %s at step %d" % (fmt_loss(b["loss"]), b["step"])
            if finite(b.get("accuracy")):
                t += " (accuracy %.4f)" % b["accuracy"]
            parts.append(t)
        if "final_eval" in s:
            f = s["final_eval"]
            t = "final eval loss %s" % fmt_loss(f["loss"])
            if finite(f.get("accuracy")):
                t += " (accuracy %.4f)" % f["accuracy"]
            parts.append(t)
        if parts:
            out.write("  " + ", ".join(parts) + "\n")
        for note in run.notes:
            out.write("  note: %s\n" % note)
        if not run.events:
            out.write("  no events\n")
        for e in run.events:
            out.write("  %s\n" % e.message)


def clean_json(v):
    """Non-finite numbers as null (JSON has no NaN)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: clean_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean_json(x) for x in v]
    return v


def json_report(runs, out, plot_path=None):
    doc = {"format": "kiln-logs", "version": 1, "runs": []}
    if plot_path:
        doc["plot"] = plot_path
    for run in runs:
        doc["runs"].append({
            "name": run.name, "metrics": run.metrics, "logs": run.logs,
            "summary": run.summary, "notes": run.notes,
            "events": [e.to_json() for e in run.events]})
    json.dump(clean_json(doc), out, indent=1, allow_nan=False, default=str)
    out.write("\n")


# ----------------------------------------------------------------------------
# Plot.

def curve(pts, most=2000):
    """(steps, raw values, smoothed values) to draw: at most `most` points
    (the median of each bucket of steps), smoothed by a running median over a
    fortieth of them."""
    if len(pts) > most:
        k = -(-len(pts) // most)
        pts = [(pts[i + len(pts[i:i + k]) // 2][0], median([v for _, v in pts[i:i + k]]))
               for i in range(0, len(pts), k)]
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    return xs, ys, median_filter(ys, max(1, len(ys) // 40) | 1)


def plot(runs, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise InputError("--plot needs matplotlib, which %s cannot import (%s)"
                         % (sys.executable, e))
    try:
        draw(runs, path, plt)
    except InputError:
        raise
    except Exception as e:  # matplotlib's own failures: one line, not a traceback
        raise InputError("--plot %s: matplotlib failed: %s: %s" % (path, type(e).__name__, e))


def draw(runs, path, plt):

    have_lr = any(finite(r.get("lr")) for run in runs for r in run.series)
    panels = ["loss", "throughput"] + (["lr"] if have_lr else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    axes = dict(zip(panels, axes[0]))
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    logscale = True
    any_loss = any_tp = False
    sps_units = all(any(finite(r.get("samples_per_s")) for r in run.series)
                    for run in runs if run.series)
    for k, run in enumerate(runs):
        c = colors[k % len(colors)]
        ser = run.series
        pts = [(r["step"], r["loss"]) for r in ser if finite(r.get("loss"))]
        if pts:
            any_loss = True
            xs, ys, sm = curve(pts)
            logscale = logscale and min(ys) > 0
            axes["loss"].plot(xs, ys, color=c, alpha=0.2, linewidth=0.8)
            axes["loss"].plot(xs, sm, color=c, linewidth=1.6, label=run.name)
        else:
            axes["loss"].plot([], [], color=c, linewidth=1.6, label=run.name)
        ev = [(r["step"], r["eval_loss"]) for r in ser if finite(r.get("eval_loss"))]
        if ev:
            xs, ys = zip(*ev)
            logscale = logscale and min(ys) > 0
            axes["loss"].plot(xs, ys, color=c, linestyle="--", linewidth=1,
                              marker="o" if len(ev) <= 60 else None, markersize=3)
        nonfin = [r["step"] for r in ser if "loss" in r and not finite(r.get("loss"))]
        if nonfin:
            axes["loss"].plot(nonfin, [1.0] * len(nonfin), linestyle="none", marker="x",
                              color=c, markersize=8,
                              transform=axes["loss"].get_xaxis_transform())
        if sps_units:
            tp = [(r["step"], r["samples_per_s"]) for r in ser
                  if finite(r.get("samples_per_s")) and r["samples_per_s"] > 0]
        else:
            tp = [(r["step"], 1000.0 / r["step_ms"]) for r in ser
                  if finite(r.get("step_ms")) and r["step_ms"] > 0]
        if tp:
            any_tp = True
            xs, ys, sm = curve(tp)
            axes["throughput"].plot(xs, ys, color=c, alpha=0.2, linewidth=0.8)
            axes["throughput"].plot(xs, sm, color=c, linewidth=1.6)
        for s in getattr(run, "restart_steps", []):
            for name in panels:
                axes[name].axvline(s, color=c, linestyle=":", linewidth=1)
        if have_lr:
            lr = [(r["step"], r["lr"]) for r in ser if finite(r.get("lr"))]
            if lr:
                xs, ys, _ = curve(lr)
                axes["lr"].plot(xs, ys, color=c, linewidth=1.4)
    ax = axes["loss"]
    ax.set_title("loss (dashed: eval; x: non-finite)")
    if any_loss and logscale:
        ax.set_yscale("log")
    ax = axes["throughput"]
    ax.set_title("throughput (dotted: restarts)")
    ax.set_ylabel("samples/s" if sps_units else "steps/s")
    if any_tp:
        ax.set_ylim(bottom=0)
    if have_lr:
        axes["lr"].set_title("learning rate")
    for name in panels:
        axes[name].set_xlabel("step")
        axes[name].grid(True, alpha=0.3)
    axes["loss"].legend(fontsize=8, title="runs", title_fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, format="png", dpi=100)
    except OSError as e:
        raise InputError("--plot %s: %s" % (path, e.strerror or e))
    finally:
        plt.close(fig)


# ----------------------------------------------------------------------------
# Command line.

class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError("%s (%s --help)" % (message, PROG))


def factor():
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            v = float("nan")
        if not (math.isfinite(v) and v > 1):
            raise argparse.ArgumentTypeError("needs a number above 1, got '%s'" % text)
        return v
    return parse


def main(argv):
    ap = Parser(prog=PROG, description="Reports what happened in Kiln training runs "
                "(divergence, restarts, stalls, throughput drops, skipped steps) and "
                "plots their curves.",
                epilog="Exit status: 0 when every run was read; 2 with --fail-on-events "
                "when any run has an event; 1 when an input cannot be read. The "
                "detectors and their thresholds: docs/Training.md, \"Reading a run: "
                "kiln-logs\".")
    ap.add_argument("runs", nargs="+", metavar="RUN",
                    help="a metrics .jsonl file, a directory with metrics.jsonl (and "
                    "*.log), or a stdout log; NAME=RUN names it")
    ap.add_argument("--plot", metavar="PNG", help="draw the runs' curves side by side")
    ap.add_argument("--json", action="store_true", help="the report as JSON")
    ap.add_argument("--fail-on-events", action="store_true",
                    help="exit status 2 when any run has an event")
    ap.add_argument("--spike-factor", type=factor(), default=3.0,
                    metavar="F", help="a loss spike is F x the running median (default 3)")
    ap.add_argument("--slowdown-factor", type=factor(), default=1.5,
                    metavar="F", help="a throughput drop is a step time F x the one "
                    "before, sustained (default 1.5)")
    ap.add_argument("--gap-factor", type=factor(), default=10.0,
                    metavar="F", help="a stall is a step F x the median step time; a "
                    "wall-time gap F x the median step and the usual pause (default 10)")
    opts = ap.parse_args(argv)

    if opts.plot:
        if importlib.util.find_spec("matplotlib") is None:
            raise InputError("--plot needs matplotlib, which %s does not have "
                             "(Debian: apt-get install python3-matplotlib)" % sys.executable)
        if os.path.isdir(opts.plot):
            raise InputError("--plot %s: a directory" % opts.plot)

    runs = [load_run(a) for a in opts.runs]
    names = {}
    for run in runs:
        names[run.name] = names.get(run.name, 0) + 1
    count = {}
    for run in runs:
        if names[run.name] > 1:
            count[run.name] = count.get(run.name, 0) + 1
            run.name = "%s#%d" % (run.name, count[run.name])
    for run in runs:
        analyze(run, opts)
    if opts.plot:
        plot(runs, opts.plot)
    if opts.json:
        json_report(runs, sys.stdout, opts.plot)
    else:
        text_report(runs, sys.stdout)
        if opts.plot:
            sys.stdout.write("\nplot: %s\n" % opts.plot)
    sys.stdout.flush()
    if opts.fail_on_events and any(run.events for run in runs):
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except InputError as e:
        sys.stdout.flush()
        sys.stderr.write("%s: %s\n" % (PROG, e))
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:  # the report piped into head: done
        os._exit(0)
    except MemoryError:
        sys.stderr.write("%s: out of memory\n" % PROG)
        sys.exit(1)
    except Exception as e:  # a bug: still one line, with what went wrong
        sys.stderr.write("%s: internal error (a bug in kiln-logs): %s: %s\n"
                         % (PROG, type(e).__name__, e))
        sys.exit(1)
