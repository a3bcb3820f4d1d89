"""The app's figures, built from an open input and its trace: the Timeline (:mod:`.timeline`, its lanes, lane tags
and plot building), spectrograms, the provenance badge, the oracle evolution, the audio player, the forced-delay
curve and the page that draws a figure for export."""
