"""What the app can open and the open input every tab shows: the bundled library and its listing, uploads (within
their budget), deep links, saved results, regions, the inspector, the microphone, forced-delay runs, and
:mod:`.views` (the open input itself and every way to open one)."""
