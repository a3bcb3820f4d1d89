"""Make the app's screenshots in docs/ at 1600x1000: ``python docs/screenshots.py`` (needs Debian's chromium and
Piper; about two minutes). It runs the app on the bundled scenarios, as a user would:

* ``timeline_spectrogram_region.png`` -- the Timeline with both spectrogram lanes and the user's pitch by Praat (a
  link with ``lanes=``), two named regions (``regions=``) and a span selected (as a drag selects it), the player, the
  export links and the inspector (Praat's values at the cursor) pinned beside the plot;
* ``compare_pinned_players.png`` -- Compare scrolled to its lanes, the three players beside the plot;
* ``talk_live.png`` -- Talk mid-conversation: a spoken question (Piper) as the microphone, the live timeline with
  an oracle revision, the inner monologue and the latency per turn.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO))

from kame_core.tts import make_tts  # noqa: E402
from tests.app_server import running_app  # noqa: E402
from tests.cdp import Chromium  # noqa: E402

LANES = ("events,user-audio,user-spectrogram,user-pitch,inner-monologue,output-audio,output-spectrogram,"
         "oracle-stream")
REGIONS = "0.5-3.3:the question;3.3-6:the interruption"
READY = "!!(window.kameTimeline && window.kameTimeline.views.timeline && window.kameTimeline.views.timeline.gd)"


def _tab(page: Chromium, name: str) -> None:
    page.evaluate(f"Array.from(document.querySelectorAll('button[role=tab]')).find(b => b.textContent.trim() === "
                  f"'{name}').click()")
    time.sleep(1.0)


def timeline_and_compare(url: str) -> None:
    page = Chromium(1600, 1000)
    try:
        page.goto(f"{url}?open=07-interruption-eiffel-tower&run=kame&t=3.2&lanes={LANES}&regions={REGIONS}")
        page.wait_for(READY, timeout=180)
        page.wait_for("window.kameTimeline.views.timeline.gd.layout.images.length === 2", timeout=60)
        page.wait_for("window.kameTimeline.regions('timeline').length === 2", timeout=60)
        page.evaluate("window.kameTimeline.setRegion('timeline', 2.4, 4.1)")
        page.evaluate("window.kameTimeline.seek('timeline', 3.2)")
        page.evaluate("document.querySelector('#kame-plot-timeline').scrollIntoView({block: 'start'})")
        page.evaluate("window.scrollBy(0, -70)")
        time.sleep(1.5)
        page.screenshot(DOCS / "timeline_spectrogram_region.png", full_page=False)
        _tab(page, "Compare")
        page.wait_for("!!(window.kameTimeline.views.compare && window.kameTimeline.views.compare.gd)", timeout=120)
        page.evaluate("document.querySelector('#kame-plot-compare').scrollIntoView({block: 'start'})")
        page.evaluate("window.scrollBy(0, 520)")  # into the second panel: the players stay beside it
        page.evaluate("window.kameTimeline.seek('compare', 3.2)")
        time.sleep(1.5)
        page.screenshot(DOCS / "compare_pinned_players.png", full_page=False)
    finally:
        page.close()


def talk(url: str, folder: Path) -> None:
    audio = make_tts("piper").synthesize("What is the capital of Australia?").audio
    wav = folder / "question.wav"
    sf.write(wav, np.concatenate([np.zeros(12000, np.float32), audio, np.zeros(8 * 24000, np.float32)]), 24000,
             subtype="PCM_16")
    page = Chromium(1600, 1000, extra_args=("--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                                            f"--use-file-for-fake-audio-capture={wav}"))
    try:
        page.goto(url)
        page.wait_for(READY, timeout=180)
        _tab(page, "Talk")
        page.evaluate("document.getElementById('kame-talk-start').click()")
        page.wait_for("window.kameTalk.state === 'live'", timeout=300)
        page.wait_for("(T => T.order.length >= 1 && T.words.trim().split(/\\s+/).length >= 6 && "
                      "T.latency.length >= 1)(window.kameTalk)", timeout=180, every=0.5)
        page.evaluate("document.getElementById('kame-talk').scrollIntoView({block: 'start'})")
        time.sleep(1.0)
        page.screenshot(DOCS / "talk_live.png", full_page=False)
        page.evaluate("document.getElementById('kame-talk-stop').click()")
        page.wait_for("window.kameTalk.state === 'idle'", timeout=60)
    finally:
        page.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with running_app(REPO / "scenarios", Path(tmp) / "app.log") as url:
            timeline_and_compare(url)
            talk(url, Path(tmp))
    for name in ("timeline_spectrogram_region.png", "compare_pinned_players.png", "talk_live.png"):
        print(DOCS / name, (DOCS / name).stat().st_size)


if __name__ == "__main__":
    main()
