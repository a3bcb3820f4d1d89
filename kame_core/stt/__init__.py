"""Streaming speech-to-text: faster-whisper (short-window decoding) segmented by Silero VAD.

* :class:`WhisperStreamingSTT` -- the :class:`~kame_core.protocols.StreamingSTT` implementation
* :func:`resolve_whisper_model` / :func:`load_whisper` -- where the model comes from, loaded once per process
* :class:`ShortWhisper` -- Whisper decoding of exactly the audio given (no 30 s padding)
* :class:`SharedWhisper` -- one batched Whisper worker per process; each session decodes through a client
* :func:`word_error_rate` -- for checking transcripts
"""
from .models import WhisperModelNotFound, load_whisper, resolve_whisper_model
from .shared import DecodeCancelled, SharedDecodeError, SharedWhisper, SharedWhisperClient, SharedWhisperStats
from .streaming import WhisperStreamingSTT
from .vad import StreamingSileroVAD, VadConfig
from .wer import word_error_rate
from .whisper_decode import ShortWhisper, Transcript

__all__ = ["DecodeCancelled", "SharedDecodeError", "SharedWhisper", "SharedWhisperClient", "SharedWhisperStats",
           "ShortWhisper", "StreamingSileroVAD", "Transcript", "VadConfig", "WhisperModelNotFound",
           "WhisperStreamingSTT", "load_whisper", "resolve_whisper_model", "word_error_rate"]
