"""Read-only functions of a record: queries over a trace (:mod:`.trace_query`), hint levels (:mod:`.hint_levels`),
latencies and session metrics (:mod:`.metrics`, :mod:`.duplex_metrics`), the oracle's evolution and how closely the
front-end followed it (:mod:`.evolution`, :mod:`.adherence`), and run diffs (:mod:`.diff`). None of them changes
what it reads, except :func:`.metrics.annotate_onsets`, which adds its figures to a finished trace."""
