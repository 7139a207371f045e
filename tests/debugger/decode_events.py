#!/usr/bin/python3
"""Independent check of Strata's debugger files with Debian's python3-protobuf.

Usage: decode_events.py TRIAL_DIR PROTO_DIR WORK_DIR

Compiles PROTO_DIR/*.proto for Python with protoc into WORK_DIR, then reads every index file
of the trial the way smdebug does (byte offset + record length), verifies the TFRecord
framing with a pure-Python CRC32C (header CRC, smdebug's constant footer 0x062DC0B3; real
payload CRCs in TensorBoard files), decodes the events and prints one JSON object:
  {"tensors": {name: {step: {"dtype", "shape", "values", "mode", "mode_step"}}},
   "tensorboard": {tag: [[step, value], ...]},
   "histograms": {tag: [[step, num, min, max, sum, counted], ...]},
   "shapes": {name: {step: shape}}, "collections_keys": [...]}
Exit status 2: the environment lacks protoc or the protobuf module (the caller skips);
1: a check failed (message on stderr).
"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys

FOOTER_MAGIC = 0x062DC0B3
MODES = {"TRAIN": 1, "EVAL": 2, "PREDICT": 3, "GLOBAL": 4}
DTYPES = {1: "<f", 2: "<d", 3: "<i", 4: "<B", 9: "<q", 10: "<?", 19: "<e"}


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def fail(message):
    sys.stderr.write("decode_events.py: " + message + "\n")
    sys.exit(1)


def read_record(blob, offset, where, tensorboard):
    if len(blob) - offset < 16:
        fail(f"{where}: truncated record at {offset}")
    (length,) = struct.unpack_from("<Q", blob, offset)
    (length_crc,) = struct.unpack_from("<I", blob, offset + 8)
    if length_crc != masked(crc32c(blob[offset:offset + 8])):
        fail(f"{where}: bad length CRC at {offset}")
    payload = blob[offset + 12:offset + 12 + length]
    (footer,) = struct.unpack_from("<I", blob, offset + 12 + length)
    expected = masked(crc32c(payload)) if tensorboard else FOOTER_MAGIC
    if footer != expected:
        fail(f"{where}: footer {footer:#x} at {offset}, expected {expected:#x}")
    return payload, 16 + length


def main():
    trial, proto_dir, work = sys.argv[1:4]
    protoc = shutil.which("protoc")
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        sys.stderr.write("python3-protobuf is not installed\n")
        sys.exit(2)
    if protoc is None:
        sys.stderr.write("protoc is not installed\n")
        sys.exit(2)
    protos = sorted(glob.glob(os.path.join(proto_dir, "*.proto")))
    subprocess.run([protoc, "-I", proto_dir, "--python_out", work] + protos, check=True)
    sys.path.insert(0, work)
    import smdebug_event_pb2
    import tensorboard_event_pb2

    out = {"tensors": {}, "tensorboard": {}, "histograms": {}, "shapes": {}, "collections_keys": []}
    for path in sorted(glob.glob(os.path.join(trial, "collections", "000000000", "*_collections.json"))):
        with open(path) as f:
            out["collections_keys"] = sorted(json.load(f).keys())
    for path in sorted(glob.glob(os.path.join(trial, "index", "*", "*.json"))):
        with open(path) as f:
            index = json.load(f)
        step = int(os.path.basename(path).split("_")[0])
        meta = index["meta"]
        for entry in index.get("shape_payload", []):
            out["shapes"].setdefault(entry["tensorname"], {})[str(step)] = entry["shape"]
        if not index["tensor_payload"]:
            continue  # shapes only: smdebug's reader does not open the event file either
        event_path = os.path.join(trial, meta["event_file_name"])
        with open(event_path, "rb") as f:
            blob = f.read()
        for entry in index["tensor_payload"]:
            payload, size = read_record(blob, entry["start_idx"], event_path, False)
            if size != entry["length"]:
                fail(f"{event_path}: index length {entry['length']} != record {size}")
            event = smdebug_event_pb2.Event()
            event.ParseFromString(payload)
            value = event.summary.value[0]
            tag = value.tag.decode()  # bytes in our .proto, string in smdebug's: same wire
            if tag != entry["tensorname"] or event.step != step:
                fail(f"{event_path}: tag/step {tag}/{event.step} != index")
            plugins = [(p.plugin_name.decode(), p.content.decode()) for p in value.metadata.plugin_data]
            want = [("mode_step", str(meta["mode_step"])), ("mode", str(MODES[meta["mode"]]))]
            if plugins != want:
                fail(f"{event_path}: plugin_data {plugins} != {want}")
            tensor = value.tensor
            shape = [d.size for d in tensor.tensor_shape.dim]
            fmt = DTYPES[tensor.dtype]
            width = struct.calcsize(fmt)
            content = tensor.tensor_content
            values = [struct.unpack_from(fmt, content, i)[0] for i in range(0, len(content), width)]
            out["tensors"].setdefault(tag, {})[str(step)] = {
                "dtype": tensor.dtype, "shape": shape, "values": [float(v) for v in values],
                "mode": meta["mode"], "mode_step": meta["mode_step"]}
    for path in sorted(glob.glob(os.path.join(trial, "tensorboard", "**", "*tfevents*"), recursive=True)):
        with open(path, "rb") as f:
            blob = f.read()
        offset, first = 0, True
        while offset < len(blob):
            payload, size = read_record(blob, offset, path, True)
            offset += size
            event = tensorboard_event_pb2.Event()
            event.ParseFromString(payload)
            if first:
                if event.file_version != "brain.Event:2":
                    fail(f"{path}: first event is not file_version brain.Event:2")
                first = False
                continue
            for v in event.summary.value:
                if v.HasField("histo"):
                    h = v.histo
                    if len(h.bucket) != len(h.bucket_limit) or sum(h.bucket) > h.num:
                        fail(f"{path}: histogram {v.tag} at step {event.step} is inconsistent")
                    out["histograms"].setdefault(v.tag, []).append(
                        [event.step, h.num, h.min, h.max, h.sum, sum(h.bucket)])
                else:
                    out["tensorboard"].setdefault(v.tag, []).append([event.step, v.simple_value])
    for points in list(out["tensorboard"].values()) + list(out["histograms"].values()):
        points.sort()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
