"""StreamSet directories: round trip, fallbacks, one-line errors, atomic writes."""

import json

import pytest

import hwmodel.streams_io as sio
from hwmodel.isa import make
from hwmodel.isa_asm import format_stream
from hwmodel.isa_codec import encode_stream
from hwmodel.streams import Placement, StreamSet, program_digest
from hwmodel.streams_io import StreamsError, read_streams, write_streams


def sample(channels=3):
    chans = []
    for c in range(channels):
        chans.append(
            [
                make("WRGB", gb=0, count=8, src=0, offset=0),
                make("ACT", cycle=10 + c, mask=0xFFFF, row=c),
                make("MAC", mask=0x5555, col=0, count=8, gb=0, acc=1),
                make("RDACC", cycle=500, bank=0, acc=1, count=1, dst=1, offset=c, stride=1),
                make("PRE", mask=0xFFFF),
                make("SIG", id=c),
            ]
        )
    host = [make("HOP", op=0), *(make("WAIT", id=c) for c in range(channels)), make("EPI", op=1)]
    placements = [Placement("w0", c, b, 0, 0, (c * 16 + b) * 256, 256) for c in range(channels) for b in range(2)] + [
        Placement("w1", 0, 3, 5, 2, 7, 16, count=4, stride=4096)
    ]
    return StreamSet("hbm2-pim", "1.0", ["x", "y", "w0", "w1"], chans, host, placements)


def test_round_trip(tmp_path):
    ss = sample()
    out = write_streams(ss, tmp_path / "prog", extra_manifest={"program": "gemv", "cycles": 1234})
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "ch00.bin",
        "ch00.s",
        "ch01.bin",
        "ch01.s",
        "ch02.bin",
        "ch02.s",
        "host.bin",
        "host.s",
        "manifest.json",
    ]
    back, manifest = read_streams(out)
    assert back == ss
    assert manifest["program"] == "gemv" and manifest["cycles"] == 1234
    assert manifest["channels"] == 3 and manifest["hardware"] == "hbm2-pim"
    assert manifest["placement_fields"][:3] == ["tensor", "channel", "bank"]
    text = (out / "manifest.json").read_text()
    assert '  ["w1",0,3,5,2,7,16,4,4096]' in text  # compact: one placement per line
    assert (out / "ch01.s").read_text().splitlines()[0].startswith("# pimsat ISA 1.0 -- hbm2-pim")


def test_many_channels_and_empty(tmp_path):
    ss = StreamSet("x", "1.0", [], [[] for _ in range(101)], [], [])
    out = write_streams(ss, tmp_path / "p")
    assert (out / "ch000.bin").exists() and (out / "ch100.s").exists()
    assert read_streams(out)[0] == ss


def test_reads_assembly_when_binary_missing(tmp_path):
    ss = sample()
    out = write_streams(ss, tmp_path / "prog")
    for p in out.glob("*.bin"):
        p.unlink()
    assert read_streams(out)[0] == ss


def test_prefers_binary(tmp_path):
    out = write_streams(sample(), tmp_path / "prog")
    (out / "ch00.s").write_text("garbage that does not assemble\n")
    assert read_streams(out)[0] == sample()


def test_overwrite_existing_stream_dir(tmp_path):
    write_streams(sample(3), tmp_path / "prog")
    write_streams(sample(1), tmp_path / "prog")
    assert len(read_streams(tmp_path / "prog")[0].channels) == 1
    assert not (tmp_path / "prog" / "ch02.s").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog"]


def test_refuses_to_replace_other_directory(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(StreamsError, match="not a stream directory"):
        write_streams(sample(), tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


@pytest.mark.parametrize("existing", [False, True])
def test_failure_leaves_nothing_half_written(tmp_path, monkeypatch, existing):
    if existing:
        write_streams(sample(1), tmp_path / "prog")
    calls = []
    real = sio.encode_records

    def flaky(instrs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(instrs)

    monkeypatch.setattr(sio, "encode_records", flaky)
    with pytest.raises(OSError, match="disk full"):
        write_streams(sample(3), tmp_path / "prog")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["prog"] if existing else [])
    if existing:
        monkeypatch.setattr(sio, "encode_records", real)
        assert read_streams(tmp_path / "prog")[0] == sample(1)


def test_write_refusals(tmp_path):
    with pytest.raises(StreamsError, match="extra manifest keys channels are reserved"):
        write_streams(sample(), tmp_path / "p", extra_manifest={"channels": 2})
    with pytest.raises(StreamsError, match="extra manifest is not JSON"):
        write_streams(sample(), tmp_path / "p", extra_manifest={"x": object()})
    ss = sample()
    ss.channels[1].append(make("HOP", op=1))
    with pytest.raises(StreamsError, match="channel 1 stream, instruction 6: HOP is a host-stream instruction"):
        write_streams(ss, tmp_path / "p")
    assert list(tmp_path.iterdir()) == []


def _one_line_naming(exc, path):
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg


def test_read_errors_name_the_file(tmp_path):
    out = write_streams(sample(), tmp_path / "prog")
    with pytest.raises(StreamsError) as e:
        read_streams(tmp_path / "absent")
    _one_line_naming(e, tmp_path / "absent" / "manifest.json")

    data = bytearray((out / "ch01.bin").read_bytes())
    data[16 + 24 * 2 + 8] = 0xEE
    (out / "ch01.bin").write_bytes(bytes(data))
    with pytest.raises(StreamsError, match=r"record 2 \(byte 64\): unknown opcode 0xee") as e:
        read_streams(out)
    _one_line_naming(e, out / "ch01.bin")

    (out / "ch01.bin").unlink()
    (out / "ch01.s").write_text("REF\nMAC mask=0x1\n")
    with pytest.raises(StreamsError, match="ch01.s:2: MAC: missing field") as e:
        read_streams(out)
    _one_line_naming(e, out / "ch01.s")

    (out / "ch01.s").write_text("REF\n")
    with pytest.raises(StreamsError, match="1 instructions, manifest says 6") as e:
        read_streams(out)
    _one_line_naming(e, out / "ch01.s")

    (out / "ch01.s").unlink()
    with pytest.raises(StreamsError, match="cannot read") as e:
        read_streams(out)
    _one_line_naming(e, out / "ch01.s")


def test_manifest_errors(tmp_path):
    out = write_streams(sample(), tmp_path / "prog")
    path = out / "manifest.json"
    m = json.loads(path.read_text())
    path.write_text("{not json")
    with pytest.raises(StreamsError, match="line 1, column 2: not valid JSON") as e:
        read_streams(out)
    _one_line_naming(e, path)
    for key, value, needle in [
        ("format", "other", "not a pimsat stream manifest"),
        ("isa_version", "2.0", "isa_version: 2.0"),
        ("channels", 4, "files.channels: .* entries, channels says 4"),
        ("placements", [["w0", 0]], r"placements\[0\]: must be a list of"),
    ]:
        path.write_text(json.dumps({**m, key: value}))
        with pytest.raises(StreamsError, match=needle) as e:
            read_streams(out)
        _one_line_naming(e, path)
    path.write_text(json.dumps({k: v for k, v in m.items() if k != "symbols"}))
    with pytest.raises(StreamsError, match="symbols: missing"):
        read_streams(out)
    path.write_text(json.dumps(m))
    ss = sample()
    (out / "host.bin").write_bytes(encode_stream([make("ACT", mask=1, row=0)] * len(ss.host)))
    with pytest.raises(StreamsError, match="host.bin: instruction 0: ACT is a channel-stream instruction"):
        read_streams(out)


@pytest.mark.parametrize("window", [1, 2, 5, 1 << 16])
def test_streams_are_written_a_window_at_a_time_as_one_piece(tmp_path, monkeypatch, window):
    """The writer formats and encodes WRITE_WINDOW instructions at a time (its memory does not
    grow with the program): the files and the program digest are those of the whole streams."""
    monkeypatch.setattr(sio, "WRITE_WINDOW", window)
    ss = sample(3)
    out = write_streams(ss, tmp_path / "prog")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["program_sha256"] == program_digest(ss)
    for i, stream in enumerate([*ss.channels, ss.host]):
        entry = manifest["files"]["channels"][i] if i < len(ss.channels) else manifest["files"]["host"]
        assert (out / entry["bin"]).read_bytes() == encode_stream(stream)
        text = (out / entry["asm"]).read_text()
        body = [line for line in text.splitlines(keepends=True) if not line.startswith("#")]
        assert "".join(body) == format_stream(stream)
        assert text.startswith("# pimsat ISA ")
    assert read_streams(out)[0] == ss
