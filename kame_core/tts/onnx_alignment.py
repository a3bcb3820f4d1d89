"""Expose a Piper (VITS) voice's phoneme durations without the ``onnx`` package.

Piper 1.8 reports phoneme alignments when the voice graph outputs its ``Ceil`` tensor (the number of
spectrogram frames per phoneme id). ``PiperVoice.load(include_alignments=True)`` adds that output with the
``onnx`` package, which KAME studio does not install. The edit is tiny -- append one ``ValueInfoProto`` (just
a name) to ``GraphProto.output`` -- so it is done here on the protobuf wire format directly:
ModelProto.graph is field 7, GraphProto.node field 1, GraphProto.output field 12, NodeProto.output field 2,
NodeProto.op_type field 4, ValueInfoProto.name field 1 (see onnx.proto).
"""
from __future__ import annotations

from collections.abc import Iterator

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_MODEL_GRAPH, _GRAPH_NODE, _GRAPH_OUTPUT = 7, 1, 12
_NODE_OUTPUT, _NODE_OP_TYPE, _VALUE_INFO_NAME = 2, 4, 1


class AlignmentPatchError(ValueError):
    """The model does not have exactly one Ceil tensor, or it is already an output."""


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int, int, int]]:
    """Yield ``(field, wire_type, field_start, payload_start, field_end)`` for each field of a message."""
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, end = _varint(buf, pos)
        elif wire == _I64:
            end = pos + 8
        elif wire == _LEN:
            length, pos = _varint(buf, pos)
            end = pos + length
        elif wire == _I32:
            end = pos + 4
        else:
            raise AlignmentPatchError(f"unsupported protobuf wire type {wire}")
        yield field, wire, start, pos, end
        pos = end


def _len_field(field: int, payload: bytes) -> bytes:
    return _encode_varint(field << 3 | _LEN) + _encode_varint(len(payload)) + payload


def add_alignment_output(model: bytes) -> bytes:
    """Return ``model`` with its single ``Ceil`` tensor added as a graph output (Piper's w_ceil)."""
    buf = memoryview(model)
    graph = next(((s, p, e) for f, w, s, p, e in _fields(buf) if f == _MODEL_GRAPH and w == _LEN), None)
    if graph is None:
        raise AlignmentPatchError("no graph in model")
    g_start, g_payload, g_end = graph
    gbuf = buf[g_payload:g_end]
    ceil_outputs: list[bytes] = []
    graph_outputs: set[bytes] = set()
    for f, w, _, p, e in _fields(gbuf):
        if f == _GRAPH_NODE and w == _LEN:
            node = gbuf[p:e]
            fields = [(nf, bytes(node[np_:ne])) for nf, nw, _, np_, ne in _fields(node) if nw == _LEN]
            if any(nf == _NODE_OP_TYPE and v == b"Ceil" for nf, v in fields):
                ceil_outputs += [v for nf, v in fields if nf == _NODE_OUTPUT]
        elif f == _GRAPH_OUTPUT and w == _LEN:
            info = gbuf[p:e]
            graph_outputs |= {bytes(info[vp:ve]) for vf, vw, _, vp, ve in _fields(info)
                              if vf == _VALUE_INFO_NAME and vw == _LEN}
    if len(ceil_outputs) != 1:
        raise AlignmentPatchError(f"expected one Ceil tensor, found {len(ceil_outputs)}")
    if ceil_outputs[0] in graph_outputs:
        raise AlignmentPatchError("the Ceil tensor is already a graph output")
    new_graph = bytes(gbuf) + _len_field(_GRAPH_OUTPUT, _len_field(_VALUE_INFO_NAME, ceil_outputs[0]))
    return bytes(buf[:g_start]) + _len_field(_MODEL_GRAPH, new_graph) + bytes(buf[g_end:])
