// KAME studio's Talk page: a browser client of the live protocol at /api/chat (kame_core/serve/page/talk.py says how it works).
// Its settings come with its markup: the JSON in #kame-talk's data-config (colours, the worklets' address, how
// to get a ticket and how to open a saved session; either may be null where the page is not the app's).
(function () {
  'use strict';
  if (window.kameTalkInstalled) return;
  window.kameTalkInstalled = true;
  var CONFIG = null;
  function config() {
    if (!CONFIG) CONFIG = JSON.parse(document.getElementById('kame-talk').dataset.config);
    return CONFIG;
  }

  // the server's own page may be opened as /?token=…: the token is read once and taken out of the address bar
  // and the history (a shared screen, a copied address or the history list would show it)
  var PAGE_TOKEN = (function () {
    var query = new URLSearchParams(location.search), token = query.get('token');
    if (token !== null && window.history && history.replaceState) {
      query.delete('token');
      var rest = query.toString();
      history.replaceState(history.state, '', location.pathname + (rest ? '?' + rest : '') + location.hash);
    }
    return token;
  })();

  var FRAME = 0.08;
  function colours() { return config().colours; }
  // a revision's colour is its hint level's (the Timeline's palette); grey until the level is known
  function hintColour(level) {
    return (level === null || level === undefined || !colours().hints[level]) ? colours().hint_unknown : colours().hints[level];
  }
  // a revision span's fill: its hint colour at the Timeline's strength over white (kame_core/serve/page/palette.py's hint_fill)
  function hintFill(level) {
    return (level === null || level === undefined || !colours().hint_fills[level]) ? colours().hint_unknown_fill
      : colours().hint_fills[level];
  }
  function newTimeline() {
    return {now: 0, span: 20, paused: false, viewEnd: null, draws: 0, drawMs: 0, maxDrawMs: 0, provenance: null,
      lanes: {user_audio: [], inner_monologue: [], output_audio: [], oracle: []},
      revisions: [], stt: [], llm: [], corrections: [], notes: [], heard: [], speechEnds: [], onsets: [],
      floor: [], endOfTurn: []};
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
    T.sessionId = null; T.replica = null; T.saved = null; T.error = ''; T.timeline = newTimeline();
    T.frontEnd = null; T.components = '';
    var slider = $('kame-talk-scroll'); if (slider) slider.value = 1000;
    var pause = $('kame-talk-pause'); if (pause) pause.textContent = 'Pause view';
  }
  // what the address gets to be admitted: a fresh one-use ticket from the app, through a Gradio event of this
  // page's session (see demo.talk), or -- on the server's own page -- the token the page was opened with
  function admission() {
    var ticket = config().ticket;
    if (!ticket) {
      return Promise.resolve(PAGE_TOKEN ? '&token=' + encodeURIComponent(PAGE_TOKEN) : '');
    }
    return askTicket(ticket).then(function (t) { return '&ticket=' + encodeURIComponent(t); });
  }
  function askTicket(ticket) {
    var box = document.querySelector('#' + ticket.box + ' textarea, #' + ticket.box + ' input');
    var ask = document.getElementById(ticket.ask);
    if (!box || !ask) return Promise.reject(new Error('the page has no ticket button'));
    var before = box.value, asked = Date.now();
    ask.click();
    return new Promise(function (resolve, reject) {
      (function poll() {
        if (box.value && box.value !== before) resolve(box.value);
        else if (Date.now() - asked > ticket.wait_ms) reject(new Error('the app gave no ticket to connect with'));
        else setTimeout(poll, 25);
      })();
    });
  }
  function revisionOf(r) {
    var L = T.timeline.revisions;
    for (var i = L.length - 1; i >= 0; i--) if (L[i].revision === r) return L[i];
    return null;
  }

  function onEvent(o) {
    var TL = T.timeline;
    if (o.type === 'session') {
      T.sessionId = o.id; T.components = o.components; T.frontEnd = o.front_end; TL.provenance = o.front_end;
      T.replica = (typeof o.replica === 'number') ? o.replica : null;
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
        var item = {revision: d.revision, t: o.t, hint_level: told ? told.hint_level : null, text: ''};
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
      case 'hold_start': case 'hold_end':  // the floor policy's holds (a forced delay's carry no floor)
        if (d.floor) TL.floor.push({t: o.t, held: o.kind === 'hold_start', floor: d.floor, p: d.p_end});
        break;
      case 'end_of_turn': TL.endOfTurn.push({t: o.t, p: d.p_end, text: d.text, bySound: d.by === 'audio'}); break;
    }
  }

  // ---- the live timeline: a canvas redrawn 10 times a second from T.timeline ----------------------------
  var LANES = [['events', 34], ['user_audio', 52], ['floor', 22], ['inner_monologue', 36], ['output_audio', 40],
               ['oracle', 44], ['heard', 16], ['frames', 24]];
  var LANE_NAMES = {events: 'LLM · notes', user_audio: 'you (STT)', floor: 'your floor', inner_monologue: 'inner monologue',
                    output_audio: 'KAME audio', oracle: 'oracle stream', heard: 'KAME hears', frames: 'frames'};
  function viewEnd() {
    var TL = T.timeline;
    return Math.max(TL.span, TL.paused && TL.viewEnd !== null ? TL.viewEnd : TL.now);
  }
  function drawTimeline() {
    var started = performance.now(), c = $('kame-talk-timeline'); if (!c) return;
    var TL = T.timeline, dpr = window.devicePixelRatio || 1, W = c.clientWidth || 800, H = 292;
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
      g.fillStyle = colours().muted; g.fillText(LANE_NAMES[l[0]], 4, b[0] + b[1] / 2);
    });
    g.save(); g.beginPath(); g.rect(left, 0, plotW, H); g.clip();
    // frame ticks with step numbers
    var f0 = Math.max(0, Math.floor(start / FRAME)), f1 = Math.ceil(end / FRAME), fb = y.frames;
    g.strokeStyle = '#cbd5e1'; g.fillStyle = colours().muted;
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
    bars(TL.lanes.user_audio, 'user_audio', colours().user);
    bars(TL.lanes.output_audio, 'output_audio', colours().output);
    // STT finals (ink) and the newest partial (muted, italic) over your audio
    var ub = y.user_audio, lastFinal = -1;
    TL.stt.forEach(function (s, i) { if (s.final) lastFinal = i; });
    g.fillStyle = colours().ink;
    TL.stt.forEach(function (s) {
      if (!s.final || !inView(s.t)) return;
      g.fillText('✔ ' + s.text, x(s.t) + 2, ub[0] + 9);
    });
    var partial = null;
    for (var i = TL.stt.length - 1; i > lastFinal; i--) if (!TL.stt[i].final) { partial = TL.stt[i]; break; }
    if (partial && inView(partial.t)) {
      g.fillStyle = colours().muted; g.font = 'italic 11px Inter, "DejaVu Sans", sans-serif';
      g.fillText('… ' + partial.text, x(partial.t) + 2, ub[0] + ub[1] - 8);
      g.font = '11px Inter, "DejaVu Sans", sans-serif';
    }
    // the floor policy: while it holds the front-end for you (shaded), and the gate's end-of-turn probability
    // (a log-scale step line, 1e-12 at the bottom, 1 at the top) as your words come
    var flb = y.floor;
    TL.floor.forEach(function (h, i) {
      if (!h.held) return;
      var t1 = i + 1 < TL.floor.length ? TL.floor[i + 1].t : TL.now;
      if (t1 < start || h.t > end) return;
      g.fillStyle = colours().user; g.globalAlpha = 0.18;
      g.fillRect(x(h.t), flb[0] + 2, Math.max(2, x(t1) - x(h.t)), flb[1] - 4); g.globalAlpha = 1;
    });
    function pY(p) { return flb[0] + flb[1] - 3 - (Math.min(0, Math.max(-12, Math.log10(Math.max(p, 1e-12)))) + 12) / 12 * (flb[1] - 6); }
    // one step line per source: the words' probability solid, the sound's (smart-turn) dashed
    [false, true].forEach(function (bySound) {
      var scores = TL.endOfTurn.filter(function (e) { return e.bySound === bySound; });
      if (!scores.length) return;
      g.strokeStyle = colours().user; g.setLineDash(bySound ? [4, 3] : []); g.beginPath();
      scores.forEach(function (e, i) {
        var t1 = i + 1 < scores.length ? scores[i + 1].t : TL.now;
        if (i === 0) g.moveTo(x(e.t), pY(e.p)); else g.lineTo(x(e.t), pY(e.p));
        g.lineTo(x(t1), pY(e.p));
      });
      g.stroke(); g.setLineDash([]);
      var last = scores[scores.length - 1];
      g.fillStyle = colours().muted;
      g.fillText('p ' + last.p.toExponential(0) + (bySound ? ' (sound)' : ''),
                 Math.min(x(TL.now), left + plotW) - (bySound ? 80 : 40), flb[0] + (bySound ? 18 : 8));
    });
    // inner monologue words: each at its frame; a word with no room is drawn as a short mark
    var ib = y.inner_monologue, lastX = -1e9; g.fillStyle = colours().ink;
    TL.lanes.inner_monologue.forEach(function (w) {
      if (!inView(w.t)) return;
      var wx = x(w.t), text = w.text.replace(/^\s+/, ''), width = g.measureText(text).width;
      if (wx >= lastX + 2) { g.fillText(text, wx, ib[0] + ib[1] / 2); lastX = wx + width; }
      else { g.fillRect(wx, ib[0] + ib[1] - 6, 2, 3); }
    });
    // self-corrections: ▼ and the abandoned words, struck through
    TL.corrections.forEach(function (k) {
      if (!inView(k.t)) return;
      var kx = x(k.t); g.fillStyle = colours().correction; g.fillText('▼', kx - 4, ib[0] + 6);
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
      g.fillStyle = hintFill(r.hint_level); g.fillRect(x0, ob[0] + 2, x1 - x0, ob[1] - 4);
      g.fillStyle = colour; g.fillRect(x0, ob[0] + 2, 2, ob[1] - 4); g.fillRect(x0, ob[0] + 2, x1 - x0, 3);
      var head = 'rev ' + r.revision + (r.hint_level === null || r.hint_level === undefined ? ' · hint …'
        : ' · hint ' + r.hint_level);
      g.save(); g.beginPath(); g.rect(x0, ob[0], x1 - x0, ob[1]); g.clip();
      g.fillStyle = colours().ink; g.font = '600 11px Inter, "DejaVu Sans", sans-serif';
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
    var eb = y.events, marks = {start: ['▲', colours().llm], chunk: ['●', colours().chunk], finish: ['■', colours().finish],
      cancel: ['✕', colours().cancel], error: ['!', colours().cancel]};
    TL.llm.forEach(function (e) {
      if (!inView(e.t)) return;
      var m = marks[e.kind]; g.fillStyle = m[1]; g.fillText(m[0], x(e.t) - 4, eb[0] + 10);
    });
    TL.notes.forEach(function (n) {
      if (!inView(n.t)) return;
      g.fillStyle = colours().cancel;
      g.fillText('⚠' + (n.late_ms ? ' +' + Math.round(n.late_ms) + ' ms' : ''), x(n.t) - 4, eb[0] + 25);
    });
    // end of your speech → onset of the answer, with the latency
    g.strokeStyle = colours().onset; g.setLineDash([3, 3]);
    TL.speechEnds.forEach(function (t) {
      if (!inView(t)) return;
      g.beginPath(); g.moveTo(x(t), ub[0]); g.lineTo(x(t), ob[0] + ob[1]); g.stroke();
    });
    g.setLineDash([]);
    TL.onsets.forEach(function (o) {
      if (!inView(o.user_end) && !inView(o.assistant_start)) return;
      var a = x(o.user_end), b = x(o.assistant_start), yy = ib[0] + 4;
      g.strokeStyle = colours().onset; g.fillStyle = colours().onset; g.lineWidth = 2;
      g.beginPath(); g.moveTo(a, yy); g.lineTo(b, yy); g.stroke(); g.lineWidth = 1;
      var l = o.latency_s !== undefined ? o.latency_s : o.delay_s;
      g.fillText((l < 0 ? '−' : '+') + Math.abs(l).toFixed(2) + ' s', Math.max(a, b) + 3, yy);
    });
    // now
    if (!TL.paused) { g.strokeStyle = colours().ink; g.beginPath(); g.moveTo(x(TL.now), 0); g.lineTo(x(TL.now), H); g.stroke(); }
    g.restore();
    g.fillStyle = colours().muted;
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
    $('kame-talk-latency').innerHTML = T.latency.length ? T.latency.map(latencyTable).join('') :
      '<i>after your first turn</i>';
    $('kame-talk-meter').textContent = 'sent ' + (T.sent * 0.08).toFixed(1) + ' s of microphone · player ran ' +
      (T.played.samples / 24000).toFixed(1) + ' s, RMS ' + T.played.rms.toFixed(3) + ', peak block RMS ' +
      T.played.max.toFixed(3) +
      (T.warnings.length ? ' · warnings: ' + T.warnings.slice(-1)[0] : '') +
      (T.frontEnd ? '\nFront-end: ' + T.frontEnd.label + ' [' + T.frontEnd.kind + ']' +
        (T.frontEnd.slot !== undefined ? ', slot ' + T.frontEnd.slot + ' of a pool of ' + T.frontEnd.pool_size : '') +
        (T.replica !== null && T.replica !== undefined ? ', served by replica ' + T.replica : '')
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
      await T.ctx.audioWorklet.addModule(config().worklets);
      T.player = new AudioWorkletNode(T.ctx, 'kame-player', {outputChannelCount: [1]});
      T.player.port.onmessage = function (e) { T.played = e.data; };
      T.player.connect(T.ctx.destination);
      T.capture = new AudioWorkletNode(T.ctx, 'kame-capture', {numberOfOutputs: 0});
      T.ctx.createMediaStreamSource(T.stream).connect(T.capture);
      await T.ctx.resume();
      setStatus(config().ticket ? 'asking the app for a ticket …' : 'connecting …');
      var admitted = await admission();
      var url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host +
        location.pathname.replace(/\/[^/]*$/, '') + '/api/chat?audio=pcm&claim=' + T.claim + admitted;
      setStatus('connecting (the first session loads the models) …');
      var ws = T.ws = new WebSocket(url);
      ws.binaryType = 'arraybuffer';
      var P = window.kameProtocol;
      ws.onmessage = function (m) {
        var msg = P.decode(m.data);
        if (!msg) return;
        if (msg.kind === 'handshake') {
          T.state = 'live'; setStatus('live — talk to KAME'); $('kame-talk-stop').disabled = false;
        } else if (msg.kind === 'text') {
          T.words += msg.text; T.timeline.lanes.inner_monologue.push({t: T.received * FRAME, text: msg.text});
        } else if (msg.kind === 'event') {
          onEvent(msg.event);
        } else if (msg.kind === 'pcm') {
          T.player.port.postMessage(msg.samples);
          T.timeline.lanes.output_audio.push({t: T.received * FRAME, level: P.rms(msg.samples)});
          T.received++; T.timeline.now = Math.max(T.timeline.now, T.received * FRAME);
        } else {
          T.warnings.push('unreadable message from the server: ' + msg.error);
        }
      };
      ws.onclose = function (e) { T.closeCode = e.code; T.closeReason = e.reason; finish(); };
      T.capture.port.onmessage = function (e) {
        if (!T.ws || T.ws.readyState !== 1 || T.state !== 'live') return;
        T.inputLevel = P.rms(e.data); T.timeline.lanes.user_audio.push({t: T.sent * FRAME, level: T.inputLevel});
        T.ws.send(P.encodePcm(e.data)); T.sent++;
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
    if (T.ws.readyState === 1) T.ws.send(window.kameProtocol.encodeJson({type: 'end'}));
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
    var open = config().open;
    if (!open) { setStatus('saved as ' + id); return; }
    var box = document.querySelector('#' + open.box + ' textarea, #' + open.box + ' input');
    box.value = id + ' ' + T.claim; box.dispatchEvent(new Event('input', {bubbles: true}));
    setTimeout(function () { document.getElementById(open.button).click(); }, 300);
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
  // Another input opened in the app while no conversation runs: the page stops showing the last one (a saved one
  // stays in the bar's list of made sessions and in Sessions). The app writes the open input's key into a hidden
  // box at every open; the page's own saved session opens as "live:ID".
  var shownKey = null;
  function followOpenInput() {
    if (!$('kame-talk')) return;  // the Talk tab not shown yet: no page to reset, no config to read
    var open = config().open;
    var box = open && open.shown && document.querySelector('#' + open.shown + ' textarea, #' + open.shown + ' input');
    if (!box || box.value === shownKey) return;
    var first = shownKey === null;
    shownKey = box.value;
    if (first || T.state !== 'idle' || (!T.timeline.now && !T.saved)) return;
    if (T.saved && T.saved.id && shownKey === 'live:' + T.saved.id) return;
    var saved = T.saved && T.saved.file ? T.saved.id : null;
    reset(); render(); drawTimeline();
    setStatus(saved ? 'Not connected. Your last conversation (' + saved + ') is saved: reopen it from the ' +
      'list of sessions made here, above, or in Sessions.' :
      'Not connected. Start asks for the microphone (use headphones; echo cancellation is on).');
  }

  // redrawn 10 times a second while a session runs; otherwise only when the canvas changed size (tab shown)
  var drawnWidth = -1;
  setInterval(function () {
    followOpenInput();
    var c = $('kame-talk-timeline'); if (!c) return;
    if (T.state === 'live' || T.state === 'stopping' || c.clientWidth !== drawnWidth) {
      drawnWidth = c.clientWidth; drawTimeline();
    }
  }, 100);
})();
