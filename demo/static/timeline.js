// KAME studio's timeline in the page: the playhead of every ``#kame-plot-<view>`` follows the players in
// ``#kame-audio-<view>...`` (play, pause, seek, time updates), the players of one view share it, and a click on
// a plot seeks its view there (on the Timeline it also sets "Inspect time"). The players are native <audio>
// elements (demo/player.py), so their media events reach a capturing listener on the document.
//
// kameSetPlayhead(root, t) moves the playhead of every timeline under root (an element or document) to t
// seconds: with Plotly.relayout where the page exposes Plotly, else (Gradio bundles Plotly privately) by moving
// the shape's SVG path and recording t in the layout, so a later redraw (zoom, resize) keeps it.
(function () {
  'use strict';
  if (window.kameSyncInstalled) return;
  window.kameSyncInstalled = true;
  function kameSetPlayhead(root, t) {
    var pending = [];
    (root || document).querySelectorAll('.js-plotly-plot').forEach(function (gd) {
      var shapes = (gd.layout && gd.layout.shapes) || [];
      var i = shapes.findIndex(function (s) { return s.name === 'playhead'; });
      if (i < 0) return;
      if (window.Plotly && window.Plotly.relayout) {
        var upd = {};
        upd['shapes[' + i + '].x0'] = t; upd['shapes[' + i + '].x1'] = t; upd['shapes[' + i + '].opacity'] = 1;
        pending.push(window.Plotly.relayout(gd, upd));
        return;
      }
      shapes[i].x0 = t; shapes[i].x1 = t; shapes[i].opacity = 1;
      var full = gd._fullLayout, xa = full && full.xaxis;
      var path = gd.querySelector('.shapelayer path[data-index="' + i + '"]');
      if (!xa || !path) return;
      var x = xa._offset + xa.l2p(t), top = full._size.t, bottom = full._size.t + full._size.h;
      path.setAttribute('d', 'M' + x + ',' + bottom + 'V' + top);
      path.style.opacity = 1;
      path.style.display = (t >= xa.range[0] && t <= xa.range[1]) ? '' : 'none';
    });
    return Promise.all(pending);
  }
  window.kameSetPlayhead = kameSetPlayhead;
  function plotFor(media) {
    var box = media.closest('[id^="kame-audio-"]');
    if (!box) return null;
    return document.getElementById('kame-plot-' + box.id.split('-')[2]);
  }
  function sync(media) {
    var plot = plotFor(media);
    if (plot) { kameSetPlayhead(plot, media.currentTime); plot.dataset.kamePlayhead = media.currentTime; }
  }
  function follow(media) {
    sync(media);
    if (!media.paused && !media.ended) requestAnimationFrame(function () { follow(media); });
  }
  ['timeupdate', 'seeked', 'seeking', 'pause', 'loadedmetadata'].forEach(function (kind) {
    document.addEventListener(kind, function (e) {
      if (e.target instanceof HTMLMediaElement) sync(e.target);
    }, true);
  });
  document.addEventListener('play', function (e) {
    if (!(e.target instanceof HTMLMediaElement)) return;
    peers(e.target).forEach(function (m) { if (!m.paused) m.pause(); });  // one player of a view at a time
    follow(e.target);
  }, true);
  // the players of one view (Compare's three) share its playhead: a seek in one moves the others there
  function peers(media) {
    var box = media.closest('[id^="kame-audio-"]');
    if (!box) return [];
    var view = box.id.split('-')[2];
    return Array.from(document.querySelectorAll('[id^="kame-audio-' + view + '"] audio'))
      .filter(function (m) { return m !== media; });
  }
  document.addEventListener('seeked', function (e) {
    var media = e.target;
    if (!(media instanceof HTMLMediaElement) || !media.paused) return;
    peers(media).forEach(function (m) {
      if (Math.abs(m.currentTime - media.currentTime) > 0.05) m.currentTime = media.currentTime;
    });
  }, true);
  // a click on a plot (not a drag: that zooms) seeks its view's players there; on the Timeline it also
  // sets "Inspect time" and shows that frame
  function timeAt(gd, clientX, clientY) {
    var full = gd && gd._fullLayout;
    if (!full || !full._size) return null;
    var box = gd.getBoundingClientRect(), px = clientX - box.left, py = clientY - box.top;
    if (py < full._size.t || py > full._size.t + full._size.h) return null;
    var names = Object.keys(full).filter(function (k) { return /^xaxis[0-9]*$/.test(k); });
    for (var i = 0; i < names.length; i++) {
      var xa = full[names[i]];
      if (xa && px >= xa._offset && px <= xa._offset + xa._length) return xa.p2l(px - xa._offset);
    }
    return null;
  }
  function seekView(host, t) {
    var view = host.id.slice('kame-plot-'.length);
    document.querySelectorAll('[id^="kame-audio-' + view + '"] audio').forEach(function (a) {
      a.currentTime = isFinite(a.duration) ? Math.min(t, a.duration) : t;
    });
    kameSetPlayhead(host, t);
    host.dataset.kamePlayhead = t;
    var inspect = view === 'timeline' && document.querySelector('#kame-inspect-time input');
    if (inspect) {
      inspect.value = t.toFixed(2);
      inspect.dispatchEvent(new Event('input', {bubbles: true}));
      inspect.dispatchEvent(new KeyboardEvent('keypress', {key: 'Enter', code: 'Enter', bubbles: true}));
    }
  }
  window.kameSeekView = seekView;
  // a plot drawn while its tab was hidden (every open redraws every tab) has Plotly's default width: when its
  // tab shows it (a click, or the Talk page's switch to Timeline) it takes its box's width
  var sized = new ResizeObserver(function (entries) {
    entries.forEach(function (entry) {
      var gd = entry.target.querySelector('.js-plotly-plot');
      var width = entry.contentRect.width;
      if (gd && width > 0 && window.Plotly && gd._fullLayout && Math.abs(gd._fullLayout.width - width) > 4)
        window.Plotly.Plots.resize(gd);
    });
  });
  var watched = new WeakSet();
  function watchPlots() {
    document.querySelectorAll('[id^="kame-plot-"]').forEach(function (host) {
      if (!watched.has(host)) { watched.add(host); sized.observe(host); }
    });
  }
  new MutationObserver(watchPlots).observe(document.body, {childList: true, subtree: true});
  watchPlots();
  var down = null;
  document.addEventListener('mousedown', function (e) {
    var host = e.target.closest && e.target.closest('[id^="kame-plot-"]');
    down = (host && e.button === 0 && !e.target.closest('.legend, .modebar, .annotation')) ?
      {host: host, x: e.clientX, y: e.clientY, at: Date.now()} : null;
  }, true);
  document.addEventListener('mouseup', function (e) {
    var d = down;
    down = null;
    if (!d || Math.abs(e.clientX - d.x) > 4 || Math.abs(e.clientY - d.y) > 4 || Date.now() - d.at > 600) return;
    var t = timeAt(d.host.querySelector('.js-plotly-plot'), e.clientX, e.clientY);
    if (t !== null && t >= 0) seekView(d.host, t);
  }, true);
})();

