"""What a hostile video costs the video pipeline (#32 findings 2 and 3), each case in a fresh process.

    python bench/video_abuse.py                      # this tree
    python bench/video_abuse.py --tree /tmp/before   # another checkout (e.g. ``git archive <commit>``), same files

The MKVs are made here with PyAV (``tests/unit/video/crafted.py``), then decoded (and joined) by the tree under test
with the service's default limits (1920×1088 px per frame, 15,000 frames, 600 s):

- ``grows``: MJPEG, 12 frames of 64×64 (what the header says), then 20 of 6000×6000 (36 MP): frames handed on, the
  outcome and the growth of the process's peak RSS while decoding in 16-frame chunks (not tracemalloc: PyAV's RGB
  arrays are views of buffers FFmpeg allocates, which it does not see);
- ``lies``: 20,000 frames of 16×16 whose header says 1 s (25 frames): the frames handed on in chunks before it stops
  (a refusal's ``frame`` is the 0-based number of the frame refused: frames decoded = frame + 1);
- ``long-audio``: 2 frames of video and ``--audio-s`` of AAC, the header saying 1 s: the result's audio length;
- ``192k``: a 192 kHz PCM track: the outcome of the join.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.unit.video.crafted import claim_duration, write_mkv  # noqa: E402

# Run in the tree under test (its ``deployments`` first on the path): decode ``path`` and say what it cost.
CHILD = r"""
import inspect, json, resource, sys, time
from pathlib import Path
import av
from deployments.video.frames import assemble, encode_segment, read_chunks
from deployments.video.probe import VideoLimits, probe_video

case, path, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
LIMITS = VideoLimits(max_frame_pixels=1920 * 1088, max_frames=15_000, max_duration_s=600.0)
bounded = "limits" in inspect.signature(read_chunks).parameters
options = {"limits": LIMITS} if bounded else {}
def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
report = {"case": case, "file_bytes": path.stat().st_size}
info = probe_video(path, LIMITS)
report["header"] = {"frames": info.frames, "seconds": round(info.duration_s, 3), "size": f"{info.width}x{info.height}"}
rss_before = rss_mib()
frames, segments, start = 0, [], time.perf_counter()
try:
    for chunk in read_chunks(path, 16, **options):
        frames += len(chunk.frames)
        if case in ("long-audio", "192k"):
            segments.append(work / f"segment{chunk.index}.mp4")
            encode_segment(chunk, chunk.frames, info.fps, segments[-1])
    if segments:
        assemble(segments, path, 0, work / "out.mp4")
        with av.open(str(work / "out.mp4")) as out:
            report["result"] = {
                s.type: {"codec": s.codec_context.name, "seconds": round(float(s.duration * s.time_base), 3),
                         **({"rate": s.codec_context.sample_rate} if s.type == "audio" else {})}
                for s in out.streams
            }
        report["result_bytes"] = (work / "out.mp4").stat().st_size
    report["outcome"] = "ok"
except Exception as exc:
    code = getattr(exc, "code", None)
    report["outcome"] = f"{type(exc).__name__}" + (f" {code}: {exc.details}" if code else f": {exc}")
report["frames_decoded"] = frames
report["wall_s"] = round(time.perf_counter() - start, 2)
report["peak_rss_growth_mib"] = round(rss_mib() - rss_before, 1)
print(json.dumps(report))
"""


def craft(folder: Path, audio_s: float) -> dict[str, Path]:
    started = time.perf_counter()
    files = {
        "grows": write_mkv(folder / "grows.mkv", [(64, 64, 12), (6000, 6000, 20)]),
        "lies": claim_duration(write_mkv(folder / "lies.mkv", [(16, 16, 20_000)]), 1.0),
        "long-audio": claim_duration(
            write_mkv(folder / "long-audio.mkv", [(32, 32, 2)], audio=("aac", 48000, audio_s)), 1.0
        ),
        "192k": write_mkv(folder / "192k.mkv", [(32, 32, 25)], audio=("pcm_s16le", 192_000, 1.0)),
    }
    print(f"# crafted in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose pipeline decodes the files")
    parser.add_argument("--audio-s", type=float, default=7200.0, help="length of the long-audio case's track")
    parser.add_argument("--cases", nargs="*", default=["grows", "lies", "long-audio", "192k"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="video-abuse-") as folder:
        files = craft(Path(folder), args.audio_s)
        for case in args.cases:
            work = Path(folder) / f"work-{case}"
            work.mkdir()
            run = subprocess.run(
                [sys.executable, "-c", CHILD, case, str(files[case]), str(work)],
                cwd=args.tree,
                capture_output=True,
                text=True,
            )
            print(run.stdout.strip() or json.dumps({"case": case, "failed": run.stderr.strip()[-2000:]}))


if __name__ == "__main__":
    main()
