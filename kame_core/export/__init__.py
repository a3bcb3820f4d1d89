"""Exports that researchers' tools open: Praat TextGrid, ELAN EAF, CSV, RTTM, an Audacity label track, and the run's
audio as a stereo WAV.

``python -m kame_core.export FILE.kame [--run KIND] --format textgrid|eaf|csv|rttm|audacity --out PATH [--audio]``

* :mod:`.tiers`    -- a run's annotation tiers (:func:`~.tiers.annotate`): what every format writes;
* :mod:`.textgrid` -- Praat TextGrid (long text format); :mod:`.eaf` -- ELAN EAF 3.0; :mod:`.table` -- CSV;
* :mod:`.speakers` -- who spoke when: RTTM (diarization tools) and an Audacity label track of the words;
* :mod:`.audio`    -- the user (left) and KAME (right) as one 16-bit WAV;
* :mod:`.write`    -- one run in one format (:func:`~.write.write_run`), for the command line and the app;
* :mod:`.cli`      -- the command line.
"""
from .audio import write_wav
from .eaf import write_eaf
from .table import COLUMNS, write_csv
from .textgrid import write_textgrid
from .tiers import TIER_NAMES, Annotations, Interval, IntervalTier, Point, PointTier, annotate
from .write import SUFFIXES, write_eaf_bundle, write_run

__all__ = ["COLUMNS", "TIER_NAMES", "Annotations", "Interval", "IntervalTier", "Point", "PointTier", "annotate",
           "SUFFIXES", "write_csv", "write_eaf", "write_eaf_bundle", "write_run", "write_textgrid", "write_wav"]
