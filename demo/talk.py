"""The Talk tab: a browser client of the live protocol (:mod:`kame_core.serve`) at ``/api/chat``.

:data:`TALK_HTML` is the tab's markup (start / stop, the live view); :data:`TALK_JS` is installed once on
page load (beside the playhead script of :mod:`demo.ui`). In the page:

* the microphone is captured with ``getUserMedia`` (echo cancellation, noise suppression, auto gain on) into
  an ``AudioContext`` at 24 kHz; a capture AudioWorklet cuts 1920-sample frames that are sent as raw PCM
  (kind 0x08, 16-bit little-endian) -- encoding Opus in a page needs a codec library, raw PCM does not;
* the answer is asked for in raw PCM (``?audio=pcm``) and played by a second AudioWorklet from a ring buffer
  (low latency, no file per chunk); it reports the RMS it played, which the page keeps in
  ``window.kameTalk.played`` (tests read it);
* the 0x02 pieces, the 0x07 events and the audio both ways feed ``window.kameTalk.timeline`` (``now``: session
  seconds received; ``lanes``: ``user_audio`` and ``output_audio`` levels per 80 ms frame, ``inner_monologue``
  words at their frames, ``oracle`` revisions; ``revisions``: ``{revision, t, hint_level, text}``; LLM requests,
  notes, self-corrections, the revision KAME hears, speech ends and turn onsets), drawn on the canvas
  ``kame-talk-timeline`` 10 times a second: the last 20 s, pausable, scrolled back with the slider or the
  wheel; the text boxes beside it are redrawn every 200 ms;
* "Latency per turn" shows each turn's newest ``turn_latency`` (the server re-sends a turn's breakdown as its
  steps, request outcomes and oracle token counts come in; a newer one replaces the row), and a revision's
  ``hint_level`` colours it as soon as it comes (kept by revision, should it come before the revision's reset);
* Stop sends ``{"type": "end"}``; once the server replies ``saved``, the session id goes into a hidden
  textbox and a hidden button opens it in Timeline / Compare (:func:`demo.views.open_talk_session`);
* right before it connects, the page clicks a hidden button whose Gradio event (of this page's session) puts a
  fresh one-use ticket of the chat server into a hidden textbox (:func:`demo.views.talk_ticket`); the page
  connects with ``&ticket=`` -- what admits it when the server has a ``KAME_TOKEN`` (a server without one
  ignores it). The page always asks, so there is one way to connect.
"""
from __future__ import annotations

import json

from .palette import LIVE_COLOURS, hint_swatches_html

#: element ids the Python side wires to
TALK_ID_BOX = "kame-talk-id"
TALK_OPEN_BUTTON = "kame-talk-open"
TALK_TICKET_BOX = "kame-talk-ticket"
TALK_TICKET_BUTTON = "kame-talk-ticket-ask"
#: how long the page waits for its ticket (a busy app answers in well under a second)
TICKET_WAIT_MS = 20000

TALK_HTML = """
<div id="kame-talk">
  <div style="display:flex;gap:8px;align-items:center;margin-bottom:6px;flex-wrap:wrap">
    <button id="kame-talk-start" class="lg primary" style="padding:6px 16px">Start talking</button>
    <button id="kame-talk-stop" class="lg secondary" style="padding:6px 16px" disabled>Stop</button>
    <button id="kame-talk-pause" class="lg secondary" style="padding:6px 12px"
      title="freeze the timeline (the session goes on); scroll back with the slider or the mouse wheel">Pause view</button>
    <span title="your microphone's level, as sent" class="kame-small">mic
      <span id="kame-talk-level"><span id="kame-talk-level-bar"></span></span></span>
    <span id="kame-talk-status" class="kame-small">Not connected. Start asks for the microphone
      (use headphones; echo cancellation is on).</span>
  </div>
  <canvas id="kame-talk-timeline" height="270"
    aria-label="live timeline of the four streams: your audio and the STT, the inner monologue, KAME's audio, the oracle"></canvas>
  <input id="kame-talk-scroll" type="range" min="0" max="1000" value="1000"
    title="scroll back through the whole session (pauses the view)">
  <div class="kame-small" id="kame-talk-legend">Last 20 s, 80 ms frames (step numbers below).
    ▲ LLM request started · ● first chunk · ■ finished · ✕ cancelled · ▼ self-correction (abandoned words struck) ·
    ⚠ missed frame deadline · ┆ end of your speech → onset of KAME's answer. Oracle spans: one per revision, coloured
    by its hint level as in the Timeline — hint = how much of your question had been heard when its request was made
    (0 little … 5 all; grey until your turn's final transcript is in): HINT_SWATCHES. The band under it: the revision
    KAME is hearing.</div>
  <div style="display:grid;grid-template-columns:1fr 1fr;gap:10px;margin-top:6px">
    <div><b>Inner monologue (what KAME says)</b><div id="kame-talk-words" class="kame-talk-box"></div></div>
    <div><b>Oracle revisions (the back-end LLM's hints)</b><div id="kame-talk-oracle" class="kame-talk-box"></div></div>
    <div><b>You (streaming STT: partials, finals)</b><div id="kame-talk-stt" class="kame-talk-box"></div></div>
    <div><b>LLM requests · turns (when KAME's first word came)</b>
      <div id="kame-talk-turns" class="kame-talk-box"></div></div>
  </div>
  <div style="margin-top:6px"><b>Latency per turn</b> <span class="kame-small">(seconds after you stopped speaking;
    negative = before; the same breakdown the Timeline shows once the session is saved)</span>
    <div id="kame-talk-latency" class="kame-talk-box" style="min-height:40px"><i>after your first turn</i></div></div>
  <div id="kame-talk-meter" class="kame-small" style="white-space:pre-wrap"></div>
</div>
""".replace("HINT_SWATCHES", hint_swatches_html(unknown=True, separator=" · "))

TALK_CSS = """
.kame-talk-box { min-height: 90px; max-height: 180px; overflow-y: auto; border: 1px solid #d1d5db;
  border-radius: 6px; padding: 6px; font-size: 13px; white-space: pre-wrap; }
.kame-talk-rev { color: #6b7280; } .kame-talk-rev.current { color: #111827; font-weight: 600; }
.kame-hidden { display: none !important; }
.kame-talk-table { border-collapse: collapse; margin: 2px 0; font-size: 12px; }
.kame-talk-table th, .kame-talk-table td { border: 1px solid #e5e7eb; padding: 1px 6px; text-align: center; }
#kame-talk-timeline { width: 100%; height: 270px; display: block; border: 1px solid #e5e7eb; border-radius: 6px;
  background: #fff; }
#kame-talk-scroll { width: 100%; margin: 2px 0; }
#kame-talk-level { display: inline-block; width: 80px; height: 8px; background: #e5e7eb; border-radius: 4px;
  vertical-align: middle; overflow: hidden; }
#kame-talk-level-bar { display: block; height: 100%; width: 0; background: #4477AA; }
"""

TALK_JS = r"""
() => {
  if (window.kameTalkInstalled) return;
  window.kameTalkInstalled = true;
  var CAPTURE = `
    class KameCapture extends AudioWorkletProcessor {
      constructor() { super(); this.buf = new Float32Array(1920); this.n = 0; }
      process(inputs) {
        var ch = inputs[0] && inputs[0][0];
        if (ch) for (var i = 0; i < ch.length; i++) {
          this.buf[this.n++] = ch[i];
          if (this.n === 1920) { this.port.postMessage(this.buf.slice(0)); this.n = 0; }
        }
        return true;
      }
    }
    registerProcessor('kame-capture', KameCapture);
    class KamePlayer extends AudioWorkletProcessor {
      constructor() {
        super(); this.ring = new Float32Array(24000 * 20); this.r = 0; this.w = 0; this.blocks = 0;
        this.sum = 0; this.count = 0; this.voiced = 0; this.max = 0; this.underruns = 0;
        this.port.onmessage = (e) => {
          var d = e.data;
          for (var i = 0; i < d.length; i++) { this.ring[this.w] = d[i]; this.w = (this.w + 1) % this.ring.length; }
        };
      }
      process(inputs, outputs) {
        var out = outputs[0][0], ss = 0;
        for (var i = 0; i < out.length; i++) {
          if (this.r === this.w) { out[i] = 0; this.underruns++; continue; }
          out[i] = this.ring[this.r]; this.r = (this.r + 1) % this.ring.length; ss += out[i] * out[i];
        }
        for (var c = 1; c < outputs[0].length; c++) outputs[0][c].set(out);
        var rms = Math.sqrt(ss / out.length);
        this.sum += ss; this.count += out.length; this.max = Math.max(this.max, rms);
        if (rms > 0.01) this.voiced++;
        if (++this.blocks % 16 === 0) {
          this.port.postMessage({rms: Math.sqrt(this.sum / this.count), max: this.max, voiced: this.voiced,
                                 samples: this.count});
        }
        return true;
      }
    }
    registerProcessor('kame-player', KamePlayer);`;

  var COLOURS = KAME_COLOURS, FRAME = 0.08;
  // a revision's colour is its hint level's (the Timeline's palette); grey until the level is known
  function hintColour(level) {
    return (level === null || level === undefined || !COLOURS.hints[level]) ? COLOURS.hint_unknown : COLOURS.hints[level];
  }
  function newTimeline() {
    return {now: 0, span: 20, paused: false, viewEnd: null, draws: 0, drawMs: 0, maxDrawMs: 0, provenance: null,
      lanes: {user_audio: [], inner_monologue: [], output_audio: [], oracle: []},
      revisions: [], stt: [], llm: [], corrections: [], notes: [], heard: [], speechEnds: [], onsets: []};
  }
  var T = window.kameTalk = {state: 'idle', words: '', revisions: {}, order: [], current: null, partial: '',
    finals: [], llm: {start: 0, cancel: 0, finish: 0}, turns: [], latency: [], hints: {}, corrections: 0, warnings: [],
    played: {rms: 0, max: 0, voiced: 0, samples: 0}, sent: 0, received: 0, inputLevel: 0, sessionId: null,
    saved: null, error: '', timeline: newTimeline()};

  function $(id) { return document.getElementById(id); }
  function esc(s) { return String(s).replace(/[&<>]/g, function (c) { return {'&': '&amp;', '<': '&lt;', '>': '&gt;'}[c]; }); }
  function setStatus(s) { T.status = s; var el = $('kame-talk-status'); if (el) el.textContent = s; }
  function reset() {
    T.words = ''; T.revisions = {}; T.order = []; T.current = null; T.partial = ''; T.finals = [];
    T.llm = {start: 0, cancel: 0, finish: 0}; T.turns = []; T.latency = []; T.hints = {}; T.corrections = 0;
    T.warnings = [];
    T.played = {rms: 0, max: 0, voiced: 0, samples: 0}; T.sent = 0; T.received = 0; T.inputLevel = 0;
    T.sessionId = null; T.saved = null; T.error = ''; T.timeline = newTimeline();
    var slider = $('kame-talk-scroll'); if (slider) slider.value = 1000;
    var pause = $('kame-talk-pause'); if (pause) pause.textContent = 'Pause view';
  }
  // a fresh one-use ticket from the app, through a Gradio event of this page's session (see demo.talk)
  function askTicket() {
    var box = document.querySelector('#KAME_TICKET_BOX textarea, #KAME_TICKET_BOX input');
    var ask = document.querySelector('#KAME_TICKET_ASK');
    if (!box || !ask) return Promise.reject(new Error('the page has no ticket button'));
    var before = box.value, asked = Date.now();
    ask.click();
    return new Promise(function (resolve, reject) {
      (function poll() {
        if (box.value && box.value !== before) resolve(box.value);
        else if (Date.now() - asked > KAME_TICKET_WAIT) reject(new Error('the app gave no ticket to connect with'));
        else setTimeout(poll, 25);
      })();
    });
  }
  function rms(f) { var ss = 0; for (var i = 0; i < f.length; i++) ss += f[i] * f[i]; return Math.sqrt(ss / f.length); }
  function revisionOf(r) {
    var L = T.timeline.revisions;
    for (var i = L.length - 1; i >= 0; i--) if (L[i].revision === r) return L[i];
    return null;
  }

  function onEvent(o) {
    var TL = T.timeline;
    if (o.type === 'session') {
      T.sessionId = o.id; T.components = o.components; T.frontEnd = o.front_end; TL.provenance = o.front_end;
      return;
    }
    if (o.type === 'saved') { T.saved = o; return; }
    if (o.type === 'warning') {
      T.warnings.push(o.message);
      // recording to disk failed: the conversation goes on (kept in memory); say so where the user looks
      if (o.about === 'recording') setStatus('live — ' + o.message);
      return;
    }
    if (o.type === 'turn_onset') { T.turns.push(o); TL.onsets.push(o); return; }
    if (o.type === 'turn_latency') {  // the turn's breakdown as known now: it replaces the one shown
      var at = T.latency.findIndex(function (l) { return l.turn === o.turn; });
      if (at >= 0) T.latency[at] = o;
      else { T.latency.push(o); T.latency.sort(function (a, b) { return a.turn - b.turn; }); }
      return;
    }
    if (o.type === 'oracle_heard') { TL.heard.push({t: o.t, revision: o.revision}); return; }
    if (o.type === 'hint_level') {  // kept by revision too: a level may come before the page drew its reset
      T.hints[o.revision] = o;
      var rev = revisionOf(o.revision);
      if (rev) { rev.hint_level = o.hint_level; rev.spoken_ratio = o.spoken_ratio; }
      return;
    }
    if (o.type !== 'event') return;
    var d = o.data || {};
    switch (o.kind) {
      case 'oracle_reset':
        T.revisions[d.revision] = ''; T.order.push(d.revision); T.current = d.revision;
        var told = T.hints[d.revision];
        var item = {revision: d.revision, t: o.t, hint_level: told ? told.hint_level :
                    (d.hint_level === undefined ? null : d.hint_level), text: ''};
        TL.revisions.push(item); TL.lanes.oracle.push(item); break;
      case 'oracle_append':
        T.revisions[d.revision] = (T.revisions[d.revision] || '') + d.text;
        var r = revisionOf(d.revision); if (r) r.text += d.text; break;
      case 'stt_partial': T.partial = d.text; TL.stt.push({t: o.t, text: d.text, final: false}); break;
      case 'stt_final':
        if ((d.text || '').trim()) T.finals.push(d.text);
        T.partial = ''; TL.stt.push({t: o.t, text: d.text, final: true}); break;
      case 'user_speech_end': TL.speechEnds.push(d.audio_t !== undefined ? d.audio_t : o.t); break;
      case 'llm_request_start': T.llm.start++; TL.llm.push({t: o.t, kind: 'start', request: d.request}); break;
      case 'llm_first_chunk': TL.llm.push({t: o.t, kind: 'chunk', request: d.request}); break;
      case 'llm_request_cancel': T.llm.cancel++; TL.llm.push({t: o.t, kind: 'cancel', request: d.request}); break;
      case 'llm_request_finish': T.llm.finish++; TL.llm.push({t: o.t, kind: 'finish', request: d.request}); break;
      case 'llm_error': TL.llm.push({t: o.t, kind: 'error', request: d.request}); break;
      case 'self_correction':
        T.corrections++; TL.corrections.push({t: o.t, text: d.abandoned_text || '', revision: d.revision}); break;
      case 'note': TL.notes.push({t: o.t, what: d.what, late_ms: d.late_ms}); break;
    }
  }

  // ---- the live timeline: a canvas redrawn 10 times a second from T.timeline ----------------------------
  var LANES = [['events', 34], ['user_audio', 52], ['inner_monologue', 36], ['output_audio', 40], ['oracle', 44],
               ['heard', 16], ['frames', 24]];
  var LANE_NAMES = {events: 'LLM · notes', user_audio: 'you (STT)', inner_monologue: 'inner monologue',
                    output_audio: 'KAME audio', oracle: 'oracle stream', heard: 'KAME hears', frames: 'frames'};
  function viewEnd() {
    var TL = T.timeline;
    return Math.max(TL.span, TL.paused && TL.viewEnd !== null ? TL.viewEnd : TL.now);
  }
  function drawTimeline() {
    var started = performance.now(), c = $('kame-talk-timeline'); if (!c) return;
    var TL = T.timeline, dpr = window.devicePixelRatio || 1, W = c.clientWidth || 800, H = 270;
    if (c.width !== Math.round(W * dpr)) { c.width = Math.round(W * dpr); c.height = Math.round(H * dpr); }
    var g = c.getContext('2d'); g.setTransform(dpr, 0, 0, dpr, 0, 0); g.clearRect(0, 0, W, H);
    var left = 112, right = 8, plotW = Math.max(50, W - left - right), end = viewEnd(), start = end - TL.span;
    function x(t) { return left + (t - start) / TL.span * plotW; }
    function inView(t) { return t >= start - 0.5 && t <= end + 0.5; }
    var y = {}, top = 4;
    LANES.forEach(function (l) { y[l[0]] = [top, l[1]]; top += l[1]; });
    g.font = '11px Inter, "DejaVu Sans", sans-serif'; g.textBaseline = 'middle';
    LANES.forEach(function (l, i) {
      var b = y[l[0]];
      if (i % 2 === 0) { g.fillStyle = '#f8fafc'; g.fillRect(left, b[0], plotW, b[1]); }
      g.fillStyle = COLOURS.muted; g.fillText(LANE_NAMES[l[0]], 4, b[0] + b[1] / 2);
    });
    g.save(); g.beginPath(); g.rect(left, 0, plotW, H); g.clip();
    // frame ticks with step numbers
    var f0 = Math.max(0, Math.floor(start / FRAME)), f1 = Math.ceil(end / FRAME), fb = y.frames;
    g.strokeStyle = '#cbd5e1'; g.fillStyle = COLOURS.muted;
    for (var f = f0; f <= f1; f++) {
      var fx = x(f * FRAME), big = f % 25 === 0;
      g.beginPath(); g.moveTo(fx, fb[0]); g.lineTo(fx, fb[0] + (big ? 9 : 4)); g.stroke();
      if (big) g.fillText(String(f), fx + 2, fb[0] + 16);
    }
    // audio levels
    function bars(items, lane, colour) {
      var b = y[lane]; g.fillStyle = colour;
      items.forEach(function (it) {
        if (!inView(it.t)) return;
        var h = Math.min(1, it.level * 6) * (b[1] - 6);
        g.fillRect(x(it.t), b[0] + b[1] / 2 - h / 2, Math.max(1, plotW / TL.span * FRAME - 1), Math.max(1, h));
      });
    }
    bars(TL.lanes.user_audio, 'user_audio', COLOURS.user);
    bars(TL.lanes.output_audio, 'output_audio', COLOURS.output);
    // STT finals (ink) and the newest partial (muted, italic) over your audio
    var ub = y.user_audio, lastFinal = -1;
    TL.stt.forEach(function (s, i) { if (s.final) lastFinal = i; });
    g.fillStyle = COLOURS.ink;
    TL.stt.forEach(function (s, i) {
      if (!s.final || !inView(s.t)) return;
      g.fillText('✔ ' + s.text, x(s.t) + 2, ub[0] + 9);
    });
    var partial = null;
    for (var i = TL.stt.length - 1; i > lastFinal; i--) if (!TL.stt[i].final) { partial = TL.stt[i]; break; }
    if (partial && inView(partial.t)) {
      g.fillStyle = COLOURS.muted; g.font = 'italic 11px Inter, "DejaVu Sans", sans-serif';
      g.fillText('… ' + partial.text, x(partial.t) + 2, ub[0] + ub[1] - 8);
      g.font = '11px Inter, "DejaVu Sans", sans-serif';
    }
    // inner monologue words: each at its frame; a word with no room is drawn as a short mark
    var ib = y.inner_monologue, lastX = -1e9; g.fillStyle = COLOURS.ink;
    TL.lanes.inner_monologue.forEach(function (w) {
      if (!inView(w.t)) return;
      var wx = x(w.t), text = w.text.replace(/^\s+/, ''), width = g.measureText(text).width;
      if (wx >= lastX + 2) { g.fillText(text, wx, ib[0] + ib[1] / 2); lastX = wx + width; }
      else { g.fillRect(wx, ib[0] + ib[1] - 6, 2, 3); }
    });
    // self-corrections: ▼ and the abandoned words, struck through
    TL.corrections.forEach(function (k) {
      if (!inView(k.t)) return;
      var kx = x(k.t); g.fillStyle = COLOURS.correction; g.fillText('▼', kx - 4, ib[0] + 6);
      if (k.text) {
        var tw = g.measureText(k.text).width, ty = ib[0] + ib[1] - 5;
        g.fillText(k.text, kx - tw - 6, ty); g.fillRect(kx - tw - 6, ty, tw, 1);
      }
    });
    // oracle revisions: spans from their reset to the next one, with their hint level and text
    var ob = y.oracle, revs = TL.revisions;
    revs.forEach(function (r, i) {
      var t1 = i + 1 < revs.length ? revs[i + 1].t : TL.now;
      if (t1 < start || r.t > end) return;
      var x0 = x(r.t), x1 = Math.max(x0 + 2, x(t1)), colour = hintColour(r.hint_level);
      g.fillStyle = colour; g.globalAlpha = 0.25; g.fillRect(x0, ob[0] + 2, x1 - x0, ob[1] - 4); g.globalAlpha = 1;
      g.fillRect(x0, ob[0] + 2, 2, ob[1] - 4); g.fillRect(x0, ob[0] + 2, x1 - x0, 3);
      var head = 'rev ' + r.revision + (r.hint_level === null || r.hint_level === undefined ? ' · hint …'
        : ' · hint ' + r.hint_level);
      g.save(); g.beginPath(); g.rect(x0, ob[0], x1 - x0, ob[1]); g.clip();
      g.fillStyle = COLOURS.ink; g.font = '600 11px Inter, "DejaVu Sans", sans-serif';
      g.fillText(head, x0 + 5, ob[0] + 12);
      g.font = '11px Inter, "DejaVu Sans", sans-serif'; g.fillText(r.text, x0 + 5, ob[0] + 30);
      g.restore();
    });
    // which revision KAME hears (from the frame its start token was fed)
    var hb = y.heard;
    TL.heard.forEach(function (h, i) {
      var t1 = i + 1 < TL.heard.length ? TL.heard[i + 1].t : TL.now;
      if (t1 < start || h.t > end) return;
      var heard = revisionOf(h.revision);
      g.fillStyle = hintColour(heard ? heard.hint_level : null);
      g.fillRect(x(h.t), hb[0] + 3, Math.max(2, x(t1) - x(h.t)), hb[1] - 6);
      g.fillStyle = '#fff'; g.fillText('rev ' + h.revision, x(h.t) + 3, hb[0] + hb[1] / 2);
    });
    // LLM requests and notes
    var eb = y.events, marks = {start: ['▲', COLOURS.llm], chunk: ['●', COLOURS.chunk], finish: ['■', COLOURS.finish],
      cancel: ['✕', COLOURS.cancel], error: ['!', COLOURS.cancel]};
    TL.llm.forEach(function (e) {
      if (!inView(e.t)) return;
      var m = marks[e.kind]; g.fillStyle = m[1]; g.fillText(m[0], x(e.t) - 4, eb[0] + 10);
    });
    TL.notes.forEach(function (n) {
      if (!inView(n.t)) return;
      g.fillStyle = COLOURS.cancel;
      g.fillText('⚠' + (n.late_ms ? ' +' + Math.round(n.late_ms) + ' ms' : ''), x(n.t) - 4, eb[0] + 25);
    });
    // end of your speech → onset of the answer, with the latency
    g.strokeStyle = COLOURS.onset; g.setLineDash([3, 3]);
    TL.speechEnds.forEach(function (t) {
      if (!inView(t)) return;
      g.beginPath(); g.moveTo(x(t), ub[0]); g.lineTo(x(t), ob[0] + ob[1]); g.stroke();
    });
    g.setLineDash([]);
    TL.onsets.forEach(function (o) {
      if (!inView(o.user_end) && !inView(o.assistant_start)) return;
      var a = x(o.user_end), b = x(o.assistant_start), yy = ib[0] + 4;
      g.strokeStyle = COLOURS.onset; g.fillStyle = COLOURS.onset; g.lineWidth = 2;
      g.beginPath(); g.moveTo(a, yy); g.lineTo(b, yy); g.stroke(); g.lineWidth = 1;
      var l = o.latency_s !== undefined ? o.latency_s : o.delay_s;
      g.fillText((l < 0 ? '−' : '+') + Math.abs(l).toFixed(2) + ' s', Math.max(a, b) + 3, yy);
    });
    // now
    if (!TL.paused) { g.strokeStyle = COLOURS.ink; g.beginPath(); g.moveTo(x(TL.now), 0); g.lineTo(x(TL.now), H); g.stroke(); }
    g.restore();
    g.fillStyle = COLOURS.muted;
    g.fillText((TL.paused ? 'paused · ' : '') + start.toFixed(1) + '–' + end.toFixed(1) + ' s', left + 4, H - 6);
    if (TL.provenance) {  // what made these streams, on the plot itself
      var who = 'front-end: ' + TL.provenance.label + ' [' + TL.provenance.kind + ']';
      g.textAlign = 'right'; g.fillText(who, W - right - 4, H - 6); g.textAlign = 'left';
    }
    var bar = $('kame-talk-level-bar');
    if (bar) bar.style.width = Math.min(100, Math.round(T.inputLevel * 600)) + '%';
    var ms = performance.now() - started;
    TL.draws++; TL.drawMs = ms; TL.maxDrawMs = Math.max(TL.maxDrawMs, ms);
  }
  function scrollTo(fraction) {
    var TL = T.timeline;
    TL.paused = true; TL.viewEnd = TL.span + Math.max(0, TL.now - TL.span) * fraction;
    $('kame-talk-pause').textContent = 'Follow live'; drawTimeline();
  }

  function secs(v) { return v === null || v === undefined ? '—' : (v >= 0 ? '+' : '−') + Math.abs(v).toFixed(2) + ' s'; }
  function latencyTable(L) {
    var head = L.steps.map(function (s) { return '<th>' + esc(s.name) + '</th>'; }).join('');
    var cells = L.steps.map(function (s) { return '<td>' + secs(s.since_end_s) + '</td>'; }).join('');
    var reqs = L.requests.map(function (r) {
      var tokens = r.tokens_fed === null ? '' : ' · rev ' + r.revision + ': ' + r.tokens_fed +
        (r.tokens_appended === null ? '' : ' of ' + r.tokens_appended) + ' oracle tokens fed' +
        (r.tokens_pending ? ', ' + r.tokens_pending + ' pending' : '');
      return '<span class="kame-talk-request">#' + r.request + ' ' + secs(r.since_end_s) + ' (' +
        esc(r.reason || 'no reason recorded') + ') → ' + esc(r.outcome) + (r.late ? ' late' : '') + tokens +
        (r.words_dropped ? ', ' + r.words_dropped + ' words dropped' : '') + '</span>';
    }).join('; ');
    return '<div class="kame-talk-latency-turn" data-turn="' + L.turn + '"><b>turn ' + (L.turn + 1) +
      '</b> (you stopped at ' + L.user_end.toFixed(2) + ' s)<table class="kame-talk-table"><tr>' + head + '</tr><tr>' + cells +
      '</tr></table><div class="kame-small">LLM requests: ' + (reqs || 'none') + '</div></div>';
  }

  function render() {
    var w = $('kame-talk-words'); if (!w) return;
    w.textContent = T.words.slice(-1500);
    var revs = T.order.slice(-8).map(function (r) {
      return '<div class="kame-talk-rev' + (r === T.current ? ' current' : '') + '">rev ' + r + ': ' +
        esc(T.revisions[r] || '') + '</div>';
    });
    $('kame-talk-oracle').innerHTML = revs.join('') || '<i>no oracle yet</i>';
    $('kame-talk-stt').innerHTML = T.finals.slice(-6).map(function (f) { return '<div>✔ ' + esc(f) + '</div>'; }).join('') +
      (T.partial ? '<div><i>… ' + esc(T.partial) + '</i></div>' : '');
    $('kame-talk-turns').innerHTML = '<div>LLM requests: ' + T.llm.start + ' started · ' + T.llm.cancel +
      ' cancelled · ' + T.llm.finish + ' finished · self-corrections: ' + T.corrections + '</div>' +
      T.turns.map(function (t) {
        var l = (t.latency_s !== undefined) ? t.latency_s : t.delay_s;
        return '<div>turn ' + (t.turn + 1) + ': first assistant word ' + Math.abs(l).toFixed(2) + ' s ' +
          (l < 0 ? 'before' : 'after') + ' you stopped (as Timeline measures it)</div>'; }).join('');
    if (T.latency.length) $('kame-talk-latency').innerHTML = T.latency.map(latencyTable).join('');
    $('kame-talk-meter').textContent = 'sent ' + (T.sent * 0.08).toFixed(1) + ' s of microphone · player ran ' +
      (T.played.samples / 24000).toFixed(1) + ' s, RMS ' + T.played.rms.toFixed(3) + ', peak block RMS ' +
      T.played.max.toFixed(3) +
      (T.warnings.length ? ' · warnings: ' + T.warnings.slice(-1)[0] : '') +
      (T.frontEnd ? '\nFront-end: ' + T.frontEnd.label + ' [' + T.frontEnd.kind + ']' +
        (T.frontEnd.slot !== undefined ? ', slot ' + T.frontEnd.slot + ' of a pool of ' + T.frontEnd.pool_size : '')
        : '') +
      (T.components ? '\nComponents: ' + T.components : '');
  }

  async function start() {
    if (T.state !== 'idle') return;
    reset(); T.state = 'starting'; setStatus('asking for the microphone …');
    // this page's secret for the session it makes: only it can open the saved session again (256 random bits)
    T.claim = Array.from(crypto.getRandomValues(new Uint8Array(32)), function (b) {
      return b.toString(16).padStart(2, '0'); }).join('');
    $('kame-talk-start').disabled = true;
    try {
      T.stream = await navigator.mediaDevices.getUserMedia({audio: {echoCancellation: true,
        noiseSuppression: true, autoGainControl: true, channelCount: 1}});
      T.ctx = new AudioContext({sampleRate: 24000, latencyHint: 'interactive'});
      await T.ctx.audioWorklet.addModule(URL.createObjectURL(new Blob([CAPTURE], {type: 'application/javascript'})));
      T.player = new AudioWorkletNode(T.ctx, 'kame-player', {outputChannelCount: [1]});
      T.player.port.onmessage = function (e) { T.played = e.data; };
      T.player.connect(T.ctx.destination);
      T.capture = new AudioWorkletNode(T.ctx, 'kame-capture', {numberOfOutputs: 0});
      T.ctx.createMediaStreamSource(T.stream).connect(T.capture);
      await T.ctx.resume();
      setStatus('asking the app for a ticket …');
      var ticket = await askTicket();
      var url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host +
        location.pathname.replace(/\/[^\/]*$/, '') + '/api/chat?audio=pcm&claim=' + T.claim +
        '&ticket=' + encodeURIComponent(ticket);
      setStatus('connecting (the first session loads the models) …');
      var ws = T.ws = new WebSocket(url);
      ws.binaryType = 'arraybuffer';
      ws.onmessage = function (m) {
        var b = new Uint8Array(m.data); if (!b.length) return;
        var kind = b[0];
        if (kind === 0) { T.state = 'live'; setStatus('live — talk to KAME'); $('kame-talk-stop').disabled = false; }
        else if (kind === 2) {
          var piece = new TextDecoder().decode(b.subarray(1));
          T.words += piece; T.timeline.lanes.inner_monologue.push({t: T.received * FRAME, text: piece});
        }
        else if (kind === 7) { onEvent(JSON.parse(new TextDecoder().decode(b.subarray(1)))); }
        else if (kind === 8) {
          var pcm = new Int16Array(m.data.slice(1)), f = new Float32Array(pcm.length);
          for (var i = 0; i < pcm.length; i++) f[i] = pcm[i] / 32768;
          T.player.port.postMessage(f);
          T.timeline.lanes.output_audio.push({t: T.received * FRAME, level: rms(f)});
          T.received++; T.timeline.now = Math.max(T.timeline.now, T.received * FRAME);
        }
      };
      ws.onclose = function (e) { T.closeCode = e.code; T.closeReason = e.reason; finish(); };
      T.capture.port.onmessage = function (e) {
        if (!T.ws || T.ws.readyState !== 1 || T.state !== 'live') return;
        var f = e.data, msg = new Uint8Array(1 + f.length * 2), dv = new DataView(msg.buffer);
        T.inputLevel = rms(f); T.timeline.lanes.user_audio.push({t: T.sent * FRAME, level: T.inputLevel});
        msg[0] = 8;
        for (var i = 0; i < f.length; i++) dv.setInt16(1 + 2 * i, Math.max(-1, Math.min(1, f[i])) * 32767, true);
        T.ws.send(msg); T.sent++;
      };
      T.timer = setInterval(render, 200);
    } catch (err) {
      T.error = String(err); setStatus('could not start: ' + err); T.state = 'idle';
      $('kame-talk-start').disabled = false; stopMedia();
    }
  }

  function stopMedia() {
    if (T.stream) T.stream.getTracks().forEach(function (t) { t.stop(); });
    if (T.ctx) T.ctx.close();
    T.stream = null; T.ctx = null;
  }

  function stop() {
    if (!T.ws) return;
    T.state = 'stopping'; setStatus('stopping: saving the session …'); $('kame-talk-stop').disabled = true;
    if (T.ws.readyState === 1) T.ws.send(new Uint8Array([7].concat(Array.from(new TextEncoder().encode('{"type":"end"}')))));
    else T.ws.close();
  }

  function finish() {
    clearInterval(T.timer); render(); drawTimeline(); stopMedia(); T.ws = null; T.state = 'idle';
    $('kame-talk-start').disabled = false; $('kame-talk-stop').disabled = true;
    var id = T.saved && T.saved.file ? T.saved.id : null;
    if (T.saved && !T.saved.file && T.saved.error) {
      setStatus('not saved (' + T.saved.frames + ' frames): ' + T.saved.error + (T.saved.retrying ?
        ' — the server keeps trying, and recovers it from its journal at its next start' : ''));
      return;
    }
    if (!id) { setStatus('ended (' + T.closeCode + (T.closeReason ? ': ' + T.closeReason : '') + ')'); return; }
    setStatus('saved as ' + id + ' — opening it in Timeline');
    var box = document.querySelector('#KAME_ID textarea, #KAME_ID input');
    box.value = id + ' ' + T.claim; box.dispatchEvent(new Event('input', {bubbles: true}));
    setTimeout(function () { document.querySelector('#KAME_OPEN').click(); }, 300);
  }

  document.addEventListener('click', function (e) {
    if (!(e.target instanceof Element)) return;
    if (e.target.closest('#kame-talk-start')) start();
    else if (e.target.closest('#kame-talk-stop')) stop();
    else if (e.target.closest('#kame-talk-pause')) {
      var TL = T.timeline; TL.paused = !TL.paused; TL.viewEnd = TL.now;
      e.target.closest('#kame-talk-pause').textContent = TL.paused ? 'Follow live' : 'Pause view';
      if (!TL.paused) $('kame-talk-scroll').value = 1000;
      drawTimeline();
    }
  }, true);
  document.addEventListener('input', function (e) {
    if (e.target instanceof Element && e.target.id === 'kame-talk-scroll') scrollTo(e.target.value / 1000);
  }, true);
  document.addEventListener('wheel', function (e) {
    if (!(e.target instanceof Element) || e.target.id !== 'kame-talk-timeline') return;
    var TL = T.timeline; if (TL.now <= TL.span) return;
    e.preventDefault();
    var endNow = viewEnd() + (e.deltaY > 0 ? 1 : -1) * 1.0;
    scrollTo(Math.max(0, Math.min(1, (endNow - TL.span) / (TL.now - TL.span))));
    $('kame-talk-scroll').value = Math.round(1000 * Math.max(0, Math.min(1, (endNow - TL.span) / (TL.now - TL.span))));
  }, {capture: true, passive: false});
  // redrawn 10 times a second while a session runs; otherwise only when the canvas changed size (tab shown)
  var drawnWidth = -1;
  setInterval(function () {
    var c = $('kame-talk-timeline'); if (!c) return;
    if (T.state === 'live' || T.state === 'stopping' || c.clientWidth !== drawnWidth) {
      drawnWidth = c.clientWidth; drawTimeline();
    }
  }, 100);
}
""".replace("KAME_ID", TALK_ID_BOX).replace("KAME_OPEN", TALK_OPEN_BUTTON).replace(
    "KAME_TICKET_BOX", TALK_TICKET_BOX).replace("KAME_TICKET_ASK", TALK_TICKET_BUTTON).replace(
    "KAME_TICKET_WAIT", str(TICKET_WAIT_MS)).replace(
    "KAME_COLOURS", json.dumps(dict(LIVE_COLOURS)))
