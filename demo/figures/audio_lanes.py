"""The audio lanes of a run's panel: the user's and KAME's waveforms (min/max envelopes), their spectrograms
(:mod:`demo.figures.spectrogram`), and Praat's pitch and intensity curves (:mod:`kame_core.analysis.acoustics`)."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kame_core.analysis.acoustics import INTENSITY_VIEW_DB, AcousticsKept, Track
from kame_core.clock import SAMPLE_RATE
from kame_core.serve.page.palette import MUTED, OUTPUT_WAVE, USER_WAVE

from .canvas import Canvas, esc, rgba
from .spectrogram import spectrogram

__all__ = ["SPECTROGRAM_TICK_HZ", "acoustic_curves", "spectrograms", "waveform_envelope", "waveforms"]

_WAVE = {"user audio": (0.56, 0.3), "output audio": (0.4, 0.32)}      # (centre, half height) above the lane's bottom
#: the spacing of a spectrogram lane's frequency ticks
SPECTROGRAM_TICK_HZ = 2000.0
#: the most points a pitch or intensity curve draws (a two-minute recording has 12,000 pitch frames)
_CURVE_POINTS = 3000


def waveform_envelope(audio: np.ndarray, sample_rate: int = SAMPLE_RATE, bucket_s: float = 0.01,
                      max_buckets: int = 12_000) -> tuple[float, np.ndarray, np.ndarray]:
    """Min/max of ``audio`` per bucket of ``bucket_s`` (coarser if that would exceed ``max_buckets``).

    Returns ``(bucket seconds, minima, maxima)`` as float32; bucket ``k`` starts at ``k * bucket seconds``.
    A min/max envelope keeps every peak and every silence visible at any zoom a screen can show, at a
    fraction of the samples. The bucket cap bounds the figure size: 2 minutes at 10 ms, a 5-minute live
    session at 25 ms.
    """
    audio = np.asarray(audio, np.float32).reshape(-1)
    n = len(audio)
    bucket = max(1, int(round(bucket_s * sample_rate)))
    if n > bucket * max_buckets:
        bucket = -(-n // max_buckets)
    if n == 0:
        empty = np.zeros(0, np.float32)
        return bucket / sample_rate, empty, empty
    m = -(-n // bucket)
    padded = np.zeros(m * bucket, np.float32)
    padded[:n] = audio
    blocks = padded.reshape(m, bucket)
    return bucket / sample_rate, blocks.min(axis=1), blocks.max(axis=1)


def waveforms(c: Canvas) -> None:
    """Each shown waveform lane: the envelope of :func:`waveform_envelope`, filled between its minima and maxima."""
    for lane, audio, colour in (("user audio", c.trace.user_audio, USER_WAVE),
                                ("output audio", c.trace.output_audio, OUTPUT_WAVE)):
        if not c.lanes.shows(lane):
            continue
        dt, lo, hi = waveform_envelope(audio, c.trace.sample_rate)
        peak = float(max(np.abs(lo).max(initial=0.0), np.abs(hi).max(initial=0.0)))
        offset, half = _WAVE[lane]
        centre = c.lanes.at(lane, offset)
        scale = half / max(peak, 1e-3)
        common = dict(type="scatter", mode="lines", x0=dt / 2, dx=dt, hoverinfo="skip", showlegend=False,
                      line=dict(width=0.6, color=colour), name=f"{c.run} · {lane}", **c.xy)
        c.traces.append(dict(common, y=(centre + hi * scale).astype(np.float32)))
        c.traces.append(dict(common, y=(centre + lo * scale).astype(np.float32), fill="tonexty",
                             fillcolor=rgba(colour, 0.55)))


def spectrograms(c: Canvas) -> None:
    """Each shown spectrogram lane: the image of :func:`demo.figures.spectrogram.spectrogram` stretched over
    the lane (named ``"spectrogram:<run>:<lane>"``), its frequencies ticked at the lane's right end every 2 kHz."""
    for lane, audio in (("user spectrogram", c.trace.user_audio),
                        ("output spectrogram", c.trace.output_audio)):
        if not c.lanes.shows(lane):
            continue
        lo, hi = c.lanes.band(lane)
        image = spectrogram(audio, c.trace.sample_rate)
        if image is None:
            c.notes.append(dict(text="no audio", xref=c.ax.x_domain, yref=c.ax.y, x=0.5,
                                y=(lo + hi) / 2, showarrow=False, font=dict(size=11, color=MUTED)))
            continue
        c.images.append(dict(source=image.data_uri(), xref=c.ax.x, yref=c.ax.y, x=0.0, y=hi - 0.02,
                             sizex=image.duration, sizey=hi - lo - 0.04, sizing="stretch", xanchor="left",
                             yanchor="top", layer="below", name=f"spectrogram:{c.run}:{lane}"))
        bottom, height = lo + 0.02, hi - lo - 0.04  # the image's own extent
        for hz in np.arange(0.0, image.max_hz + 1.0, SPECTROGRAM_TICK_HZ):
            y = bottom + height * hz / image.max_hz
            c.shapes.append(dict(type="line", xref=c.ax.x_domain, yref=c.ax.y, x0=1.0, x1=1.006, y0=y,
                                 y1=y, line=dict(color=MUTED, width=1)))
            top = hz + SPECTROGRAM_TICK_HZ > image.max_hz
            c.notes.append(dict(text=f"{hz / 1000:.0f}{' kHz' if top else ''}", xref=c.ax.x_domain,
                                yref=c.ax.y, x=1.006, y=y, xanchor="left", yanchor="middle", xshift=2,
                                showarrow=False, font=dict(size=9, color=MUTED)))


def acoustic_curves(c: Canvas, kept: AcousticsKept) -> None:
    """Each shown pitch and intensity lane: Praat's curve of that channel (:mod:`kame_core.analysis.acoustics`),
    pitch from its floor (bottom) to its ceiling, intensity over Praat's 50-100 dB view (quieter frames, and
    digital silence's -300 dB, are not drawn); the hover gives the value, the lane's corner Praat's settings.
    ``kept``: where the analyses are kept between redraws."""
    for channel, audio, colour in (("user", c.trace.user_audio, USER_WAVE),
                                   ("kame", c.trace.output_audio, OUTPUT_WAVE)):
        pitch_lane, intensity_lane = f"{channel} pitch", f"{channel} intensity"
        if not (c.lanes.shows(pitch_lane) or c.lanes.shows(intensity_lane)):
            continue
        made = kept.of(audio, c.trace.sample_rate)
        for lane in (pitch_lane, intensity_lane):
            if not c.lanes.shows(lane):
                continue
            lo, hi = c.lanes.band(lane)
            if made is None:
                c.notes.append(dict(text="no audio Praat can analyse", xref=c.ax.x_domain, yref=c.ax.y,
                                    x=0.5, y=(lo + hi) / 2, showarrow=False, font=dict(size=11, color=MUTED)))
                continue
            settings = made.settings
            if lane == pitch_lane:
                track, view = made.pitch_track(), (settings.pitch_floor_hz, settings.pitch_ceiling_hz)
                ticks = [view[0], *(hz for hz in range(200, int(view[1]), 200) if hz - view[0] >= 100), view[1]]
                what = (f"pitch (Praat {made.praat_version}, To Pitch (ac): floor {view[0]:g} Hz, ceiling "
                        f"{view[1]:g} Hz)")
            else:
                track, view = made.intensity_track(), INTENSITY_VIEW_DB
                ticks = [view[0], (view[0] + view[1]) / 2, view[1]]
                what = (f"intensity (Praat {made.praat_version}, To Intensity: minimum pitch "
                        f"{settings.intensity_minimum_pitch_hz:g} Hz; view {view[0]:g}-{view[1]:g} dB)")
            _curve(c, lane, track, view, ticks, colour, what)


def _curve(c: Canvas, lane: str, track: Track, view: tuple[float, float], ticks: Sequence[float], colour: str,
           what: str) -> None:
    """``track`` drawn in ``lane`` over ``view`` (values under it are gaps, over it at the top), at most
    :data:`_CURVE_POINTS` points (every k-th frame of a long recording), ticked at the lane's right end."""
    lo, hi = c.lanes.band(lane)
    bottom, top = lo + 0.08, hi - 0.2
    step = max(1, -(-len(track.times) // _CURVE_POINTS))
    times, values = track.times[::step], track.values[::step]
    shown = np.where(values >= view[0], np.minimum(values, view[1]), np.nan)
    ys = np.round(bottom + (shown - view[0]) / (view[1] - view[0]) * (top - bottom), 4)
    c.traces.append(dict(type="scatter", mode="lines", x=np.round(times, 3).tolist(),
                         y=[None if math.isnan(y) else y for y in ys.tolist()],  # gaps: unvoiced, quiet
                         customdata=[None if math.isnan(v) else v for v in np.round(values, 2).tolist()],
                         connectgaps=False,
                         line=dict(width=1.3, color=colour), showlegend=False, name=f"{c.run} · {lane}",
                         hovertemplate=f"{lane} %{{customdata:.1f}} {track.unit} at %{{x:.2f}} s"
                                       "<extra></extra>", **c.xy))
    c.notes.append(dict(text=esc(what), xref=c.ax.x_domain, yref=c.ax.y, x=0.0, y=hi - 0.02,
                        xanchor="left", yanchor="top", xshift=3, showarrow=False,
                        font=dict(size=9, color=MUTED)))
    for value in ticks:
        y = bottom + (value - view[0]) / (view[1] - view[0]) * (top - bottom)
        c.shapes.append(dict(type="line", xref=c.ax.x_domain, yref=c.ax.y, x0=1.0, x1=1.006, y0=y, y1=y,
                             line=dict(color=MUTED, width=1)))
        end = value in (view[0], view[1])
        c.notes.append(dict(text=f"{value:g}{' ' + track.unit if end else ''}", xref=c.ax.x_domain,
                            yref=c.ax.y, x=1.006, y=y, xanchor="left", yanchor="middle", xshift=2,
                            showarrow=False, font=dict(size=9, color=MUTED)))
