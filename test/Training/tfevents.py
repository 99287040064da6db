#!/usr/bin/python3
# A reader of TensorBoard event files, written against the format (not
# TensorBoard's code), to check what kiln-train writes with --tensorboard
# (runtime/train/TensorBoard.{h,cpp}).
#
# Usage: /usr/bin/python3 test/Training/tfevents.py PATH...
#   PATH is an event file, or a directory: every file in it whose name holds
#   "tfevents", in name order (TensorBoard's order). Prints one JSON object
#   per line for each record:
#     {"step": 0, "wall_time": 1700000000.5, "file_version": "brain.Event:2"}
#     {"step": 0, "wall_time": ..., "session_log": "START"}
#     {"step": 10, "wall_time": ..., "tag": "loss", "value": 0.25}
#     {"step": 10, "wall_time": ..., "tag": "params/w", "histogram":
#      {"min": .., "max": .., "num": .., "sum": .., "sum_squares": ..,
#       "bucket_limit": [..], "bucket": [..]}}
#   (an event with several summary values prints one line per value; a NaN
#   or infinite number prints as NaN / Infinity, which Python's json reads).
#   Every record's two masked CRC-32Cs are checked; a mismatch, a truncated
#   record or a malformed protobuf is an error naming the file, the record's
#   index and its byte offset, on stderr with exit status 1.
#
# As a module: read_records(path), decode_event(data), events(paths) and
# json_lines(paths).
#
# Format: TFRecord framing (u64 length LE, u32 masked CRC-32C of the length,
# data, u32 masked CRC-32C of the data; masked = ((c >> 15) | (c << 17)) +
# 0xa282ead8), each record a tensorboard.Event
# (tensorboard/compat/proto/event.proto, summary.proto, histogram.proto).
import json
import os
import struct
import sys


class EventFileError(Exception):
    pass


def _crc32c_table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli) of `data`, continuing from `crc`."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(path):
    """[(offset, data)] of the file's records, both CRCs checked."""
    with open(path, "rb") as f:
        buf = f.read()
    records = []
    off = 0
    while off < len(buf):
        where = "%s: record %d at offset %d" % (path, len(records), off)
        if off + 12 > len(buf):
            raise EventFileError("%s: truncated header (%d bytes left)"
                                 % (where, len(buf) - off))
        header = buf[off:off + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", buf[off + 8:off + 12])
        if length_crc != masked_crc32c(header):
            raise EventFileError(
                "%s: length CRC mismatch (stored 0x%08x, computed 0x%08x)"
                % (where, length_crc, masked_crc32c(header)))
        end = off + 12 + length
        if end + 4 > len(buf):
            raise EventFileError("%s: truncated data (%d bytes, %d left)"
                                 % (where, length, len(buf) - off - 12))
        data = buf[off + 12:end]
        (data_crc,) = struct.unpack("<I", buf[end:end + 4])
        if data_crc != masked_crc32c(data):
            raise EventFileError(
                "%s: data CRC mismatch (stored 0x%08x, computed 0x%08x)"
                % (where, data_crc, masked_crc32c(data)))
        records.append((off, data))
        off = end + 4
    return records


# --- protobuf wire format -------------------------------------------------

def _varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise EventFileError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise EventFileError("varint longer than 10 bytes")


def _fields(buf):
    """[(field number, wire type, value)] of a message: ints for varints,
    bytes for fixed64 / fixed32 / length-delimited fields."""
    out = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise EventFileError("field %d: unknown wire type %d"
                                 % (number, wire))
        if pos > len(buf):
            raise EventFileError("field %d runs past its message" % number)
        out.append((number, wire, value))
    return out


def _double(wire, value, name):
    if wire != 1:
        raise EventFileError("%s: wire type %d, not a double" % (name, wire))
    return struct.unpack("<d", value)[0]


def _float32(value):
    """A float32 as the shortest decimal that reads back to it."""
    (f,) = struct.unpack("<f", value)
    if f != f or f in (float("inf"), float("-inf")):
        return f
    for digits in range(1, 10):
        s = float("%.*g" % (digits, f))
        if struct.pack("<f", s) == value:
            return s
    return f


def _int64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _doubles(wire, value, name):
    if wire == 1:  # one unpacked element
        return [struct.unpack("<d", value)[0]]
    if wire != 2 or len(value) % 8:
        raise EventFileError("%s: not packed doubles" % name)
    return list(struct.unpack("<%dd" % (len(value) // 8), value))


def _histogram(buf):
    h = {"min": 0.0, "max": 0.0, "num": 0.0, "sum": 0.0, "sum_squares": 0.0,
         "bucket_limit": [], "bucket": []}
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    for number, wire, value in _fields(buf):
        if number in names:
            h[names[number]] = _double(wire, value, names[number])
        elif number == 6:
            h["bucket_limit"] += _doubles(wire, value, "bucket_limit")
        elif number == 7:
            h["bucket"] += _doubles(wire, value, "bucket")
    if len(h["bucket_limit"]) != len(h["bucket"]):
        raise EventFileError("histogram: %d bucket limits, %d buckets"
                             % (len(h["bucket_limit"]), len(h["bucket"])))
    return h


def _value(buf):
    v = {}
    for number, wire, value in _fields(buf):
        if number == 1 and wire == 2:
            v["tag"] = value.decode("utf-8")
        elif number == 2 and wire == 5:
            v["value"] = _float32(value)
        elif number == 5 and wire == 2:
            v["histogram"] = _histogram(value)
    if "tag" not in v:
        raise EventFileError("summary value without a tag")
    return v


_SESSION_STATUS = {0: "STATUS_UNSPECIFIED", 1: "START", 2: "STOP",
                   3: "CHECKPOINT"}


def decode_event(data):
    """An Event as a dict: step, wall_time and one of file_version,
    session_log or summary (a list of {"tag", "value" | "histogram"})."""
    e = {"step": 0, "wall_time": 0.0}
    for number, wire, value in _fields(data):
        if number == 1:
            e["wall_time"] = _double(wire, value, "wall_time")
        elif number == 2 and wire == 0:
            e["step"] = _int64(value)
        elif number == 3 and wire == 2:
            e["file_version"] = value.decode("utf-8")
        elif number == 5 and wire == 2:
            e["summary"] = [_value(v) for n, w, v in _fields(value)
                            if n == 1 and w == 2]
        elif number == 7 and wire == 2:
            status = 0
            for n, w, v in _fields(value):
                if n == 1 and w == 0:
                    status = v
            e["session_log"] = _SESSION_STATUS.get(status, str(status))
    return e


def event_files(path):
    if os.path.isdir(path):
        return [os.path.join(path, n) for n in sorted(os.listdir(path))
                if "tfevents" in n and os.path.isfile(os.path.join(path, n))]
    return [path]


def events(paths):
    """(file, index, offset, event dict) of every record of `paths`."""
    for path in paths:
        for f in event_files(path):
            for i, (off, data) in enumerate(read_records(f)):
                try:
                    yield f, i, off, decode_event(data)
                except EventFileError as err:
                    raise EventFileError("%s: record %d at offset %d: %s"
                                         % (f, i, off, err))


def json_lines(paths):
    """The JSON objects the command line prints, in order."""
    for _, _, _, e in events(paths):
        head = {"step": e["step"], "wall_time": e["wall_time"]}
        if "summary" in e:
            for v in e["summary"]:
                yield dict(head, **v)
        else:
            yield dict(head, **{k: v for k, v in e.items() if k not in head})


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stderr.write("usage: tfevents.py PATH...  (event files or "
                         "directories of them)\n")
        return 2
    try:
        files = [f for p in argv for f in event_files(p)]
        if not files:
            raise EventFileError("%s: no event files" % " ".join(argv))
        for line in json_lines(argv):
            print(json.dumps(line))
    except (EventFileError, OSError) as err:
        sys.stderr.write("tfevents.py: %s\n" % err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
