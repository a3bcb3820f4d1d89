"""The Talk tab: a browser client of the live protocol (:mod:`kame_core.serve`) at ``/api/chat``.

:data:`TALK_HTML` is the tab's markup (start / stop, the live view); :data:`TALK_JS` is installed once on
page load (beside the playhead script of :mod:`demo.ui`). In the page:

* the microphone is captured with ``getUserMedia`` (echo cancellation, noise suppression, auto gain on) into
  an ``AudioContext`` at 24 kHz; a capture AudioWorklet cuts 1920-sample frames that are sent as raw PCM
  (kind 0x08, 16-bit little-endian) -- encoding Opus in a page needs a codec library, raw PCM does not;
* the answer is asked for in raw PCM (``?audio=pcm``) and played by a second AudioWorklet from a ring buffer
  (low latency, no file per chunk); it reports the RMS it played, which the page keeps in
  ``window.kameTalk.played`` (tests read it);
* the 0x02 pieces and 0x07 events update the live view (inner-monologue words, oracle revisions with their
  text, STT partials and finals, LLM requests, the delay before the assistant started after each user turn),
  redrawn every 200 ms;
* Stop sends ``{"type": "end"}``; once the server replies ``saved``, the session id goes into a hidden
  textbox and a hidden button opens it in Timeline / Compare (:func:`demo.views.open_talk_session`).
"""
from __future__ import annotations

#: element ids the Python side wires to
TALK_ID_BOX = "kame-talk-id"
TALK_OPEN_BUTTON = "kame-talk-open"

TALK_HTML = """
<div id="kame-talk">
  <div style="display:flex;gap:8px;align-items:center;margin-bottom:8px">
    <button id="kame-talk-start" class="lg primary" style="padding:6px 16px">Start talking</button>
    <button id="kame-talk-stop" class="lg secondary" style="padding:6px 16px" disabled>Stop</button>
    <span id="kame-talk-status" class="kame-small">Not connected. Start asks for the microphone
      (use headphones; echo cancellation is on).</span>
  </div>
  <div style="display:grid;grid-template-columns:1fr 1fr;gap:10px">
    <div><b>Inner monologue (what KAME says)</b><div id="kame-talk-words" class="kame-talk-box"></div></div>
    <div><b>Oracle revisions (the back-end LLM's hints)</b><div id="kame-talk-oracle" class="kame-talk-box"></div></div>
    <div><b>You (streaming STT: partials, finals)</b><div id="kame-talk-stt" class="kame-talk-box"></div></div>
    <div><b>LLM requests · turns (delay before the assistant started)</b>
      <div id="kame-talk-turns" class="kame-talk-box"></div></div>
  </div>
  <div id="kame-talk-meter" class="kame-small" style="white-space:pre-wrap"></div>
</div>
"""

TALK_CSS = """
.kame-talk-box { min-height: 90px; max-height: 180px; overflow-y: auto; border: 1px solid #d1d5db;
  border-radius: 6px; padding: 6px; font-size: 13px; white-space: pre-wrap; }
.kame-talk-rev { color: #6b7280; } .kame-talk-rev.current { color: #111827; font-weight: 600; }
.kame-hidden { display: none !important; }
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

  var T = window.kameTalk = {state: 'idle', words: '', revisions: {}, order: [], current: null, partial: '',
    finals: [], llm: {start: 0, cancel: 0, finish: 0}, turns: [], corrections: 0, warnings: [],
    played: {rms: 0, max: 0, voiced: 0, samples: 0}, sent: 0, sessionId: null, saved: null, error: ''};

  function $(id) { return document.getElementById(id); }
  function esc(s) { return String(s).replace(/[&<>]/g, function (c) { return {'&': '&amp;', '<': '&lt;', '>': '&gt;'}[c]; }); }
  function setStatus(s) { T.status = s; var el = $('kame-talk-status'); if (el) el.textContent = s; }
  function reset() {
    T.words = ''; T.revisions = {}; T.order = []; T.current = null; T.partial = ''; T.finals = [];
    T.llm = {start: 0, cancel: 0, finish: 0}; T.turns = []; T.corrections = 0; T.warnings = [];
    T.played = {rms: 0, max: 0, voiced: 0, samples: 0}; T.sent = 0; T.sessionId = null; T.saved = null; T.error = '';
  }

  function onEvent(o) {
    if (o.type === 'session') { T.sessionId = o.id; T.components = o.components; T.frontEnd = o.front_end; return; }
    if (o.type === 'saved') { T.saved = o; return; }
    if (o.type === 'warning') { T.warnings.push(o.message); return; }
    if (o.type === 'turn_onset') { T.turns.push(o); return; }
    if (o.type !== 'event') return;
    var d = o.data || {};
    switch (o.kind) {
      case 'oracle_reset': T.revisions[d.revision] = ''; T.order.push(d.revision); T.current = d.revision; break;
      case 'oracle_append': T.revisions[d.revision] = (T.revisions[d.revision] || '') + d.text; break;
      case 'stt_partial': T.partial = d.text; break;
      case 'stt_final': if ((d.text || '').trim()) T.finals.push(d.text); T.partial = ''; break;
      case 'llm_request_start': T.llm.start++; break;
      case 'llm_request_cancel': T.llm.cancel++; break;
      case 'llm_request_finish': T.llm.finish++; break;
      case 'self_correction': T.corrections++; break;
    }
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
      var url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host +
        location.pathname.replace(/\/[^\/]*$/, '') + '/api/chat?audio=pcm';
      setStatus('connecting (the first session loads the models) …');
      var ws = T.ws = new WebSocket(url);
      ws.binaryType = 'arraybuffer';
      ws.onmessage = function (m) {
        var b = new Uint8Array(m.data); if (!b.length) return;
        var kind = b[0];
        if (kind === 0) { T.state = 'live'; setStatus('live — talk to KAME'); $('kame-talk-stop').disabled = false; }
        else if (kind === 2) { T.words += new TextDecoder().decode(b.subarray(1)); }
        else if (kind === 7) { onEvent(JSON.parse(new TextDecoder().decode(b.subarray(1)))); }
        else if (kind === 8) {
          var pcm = new Int16Array(m.data.slice(1)), f = new Float32Array(pcm.length);
          for (var i = 0; i < pcm.length; i++) f[i] = pcm[i] / 32768;
          T.player.port.postMessage(f);
        }
      };
      ws.onclose = function (e) { T.closeCode = e.code; T.closeReason = e.reason; finish(); };
      T.capture.port.onmessage = function (e) {
        if (!T.ws || T.ws.readyState !== 1 || T.state !== 'live') return;
        var f = e.data, msg = new Uint8Array(1 + f.length * 2), dv = new DataView(msg.buffer);
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
    clearInterval(T.timer); render(); stopMedia(); T.ws = null; T.state = 'idle';
    $('kame-talk-start').disabled = false; $('kame-talk-stop').disabled = true;
    var id = T.saved ? T.saved.id : null;
    if (!id) { setStatus('ended (' + T.closeCode + (T.closeReason ? ': ' + T.closeReason : '') + ')'); return; }
    setStatus('saved as ' + id + ' — opening it in Timeline');
    var box = document.querySelector('#KAME_ID textarea, #KAME_ID input');
    box.value = id; box.dispatchEvent(new Event('input', {bubbles: true}));
    setTimeout(function () { document.querySelector('#KAME_OPEN').click(); }, 300);
  }

  document.addEventListener('click', function (e) {
    if (!(e.target instanceof Element)) return;
    if (e.target.closest('#kame-talk-start')) start();
    else if (e.target.closest('#kame-talk-stop')) stop();
  }, true);
}
""".replace("KAME_ID", TALK_ID_BOX).replace("KAME_OPEN", TALK_OPEN_BUTTON)
