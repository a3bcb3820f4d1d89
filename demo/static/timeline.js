// KAME studio's timeline in the page: the Timeline and Compare figures as researchers work in Praat or ELAN.
//
// Gradio draws each figure with its own private Plotly; this script redraws the figures of the views in VIEWS
// with the page's Plotly (plotly.min.js, served beside it) in a div of its own (.kame-figure, first in the
// host), hides Gradio's copy (.kame-source), and from then on owns the interaction:
//  * one playhead per view, shared by the plot, the overview strip, the view's players and (Timeline) the
//    inspector: the players move it while they play; a click, a key or the overview moves the players;
//  * drag on the plot to select a region (Praat's convention; "Zoom" mode makes a drag zoom instead); play it
//    once or loop it; "Zoom to selection" / "Show all"; the mouse wheel zooms the time axis;
//  * keys (when no text field has the focus): space play / pause (the region, if one is selected), ←/→ one
//    80 ms frame, shift+←/→ one second, Home / End;
//  * a click on a token snaps to its frame;
//  * an overview strip of the whole session (both waveforms) with the visible window: click or drag it to move
//    the window;
//  * word labels laid out again at every zoom (timeline-layout.js), so a word that fits is printed;
//  * (Timeline) named regions: "+ Region" keeps the selection as one, listed under the toolbar (rename, select,
//    delete), drawn on the plot, sent whole to the server after each change (the hidden #kame-regions box: the
//    link's regions= and the exports' regions tier carry them) and read back from it when an input opens;
//    selections snap to the 80 ms frames unless "Snap" is off; "Export selection" asks the server for the
//    selection's WAV and tiers (the hidden #kame-selection box) and follows the link it answers with.
//  * each lane's title on the plot is a handle: drag it (or focus it, ↑ / ↓) to move the lane; the page moves it in
//    every view itself (timeline-layout.js's reorderLanes, from the lanes the figure names for each element) and
//    tells the server the order (the hidden #kame-lane-order box: the link and the Lanes box follow).
// Each redraw's time is kept in window.kameTimeline.redraws (ms; tests and the benchmark read it).
//
// kameSetPlayhead(root, t) moves the playhead of every timeline under root (an element or document) to t
// seconds: with Plotly.relayout where the page has Plotly, else by moving the shape's SVG path.
(function () {
  'use strict';
  if (window.kameSyncInstalled) return;
  window.kameSyncInstalled = true;
  var VIEWS = ['timeline', 'compare'];
  var SNAP_TRACES = ['oracle token', 'inner monologue', 'abandoned in a self-correction', 'TTS word'];
  var state = {};
  var K = window.kameTimeline = {views: state, redraws: []};

  function layout() { return window.kameLayout; }

  // ------------------------------------------------------------------------------------------ playhead
  function kameSetPlayhead(root, t) {
    var root_ = root || document, plots = Array.from(root_.querySelectorAll('.js-plotly-plot'));
    if (root_.classList && root_.classList.contains('js-plotly-plot')) plots.push(root_);
    return Promise.all(plots.map(function (gd) { return placePlayhead(gd, t); }));
  }
  function placePlayhead(gd, t) {
    if (gd.classList.contains('kame-source')) return null;  // Gradio's hidden copy: its Plotly is not ours
    var shapes = (gd.layout && gd.layout.shapes) || [];
    var i = shapes.findIndex(function (s) { return s.name === 'playhead'; });
    if (i < 0) return null;
    var drawn = gd.querySelector('.shapelayer path[data-index="' + i + '"]');
    if (window.Plotly && window.Plotly.relayout && !(drawn && shapes[i].opacity > 0)) {
      var upd = {};
      upd['shapes[' + i + '].x0'] = t; upd['shapes[' + i + '].x1'] = t; upd['shapes[' + i + '].opacity'] = 1;
      return window.Plotly.relayout(gd, upd);
    }
    shapes[i].x0 = t; shapes[i].x1 = t; shapes[i].opacity = 1;
    var full = gd._fullLayout, xa = full && full.xaxis;
    var path = drawn;  // moved on the SVG: a redraw per animation frame would stall the page while it plays
    if (!xa || !path) return null;
    var x = xa._offset + xa.l2p(t), top = full._size.t, bottom = full._size.t + full._size.h;
    path.setAttribute('d', 'M' + x + ',' + bottom + 'V' + top);
    path.style.opacity = 1;
    path.style.display = (t >= xa.range[0] && t <= xa.range[1]) ? '' : 'none';
    return null;
  }
  window.kameSetPlayhead = kameSetPlayhead;

  // -------------------------------------------------------------------------------------- the views
  function viewOf(el) {
    var host = el && el.closest && el.closest('[id^="kame-plot-"]');
    return host ? state[host.id.slice('kame-plot-'.length)] || null : null;
  }
  function players(name) {
    return Array.from(document.querySelectorAll('[id^="kame-audio-' + name + '"] audio'));
  }
  function meta(v) { return (v.gd && v.gd.layout && v.gd.layout.meta && v.gd.layout.meta.kame_timeline) || {}; }
  function duration(v) {
    var d = meta(v).duration;
    return isFinite(d) && d > 0 ? d : 0;
  }
  function shapeIndex(v, name) {
    return ((v.gd.layout && v.gd.layout.shapes) || []).findIndex(function (s) { return s.name === name; });
  }
  function xRange(v) {
    var xa = v.gd && v.gd._fullLayout && v.gd._fullLayout.xaxis;
    return xa ? [xa.range[0], xa.range[1]] : [0, duration(v)];
  }

  function button(label, title, onClick) {
    var b = document.createElement('button');
    b.type = 'button'; b.textContent = label; b.title = title; b.className = 'kame-tool';
    b.addEventListener('click', function (e) { e.preventDefault(); onClick(b); });
    return b;
  }

  function build(name, host) {
    var v = state[name] = {name: name, host: host, t: 0, region: null, loop: false, mode: 'select',
      source: null, sourceData: null, sourceLayout: null, drawing: null, lastRange: null};
    var box = document.createElement('div');
    box.className = 'kame-figure-box';
    var bar = document.createElement('div');
    bar.className = 'kame-toolbar';
    v.modeButton = button('Drag: select', 'what a drag on the plot does: select a region (as in Praat) or zoom',
      function (b) {
        v.mode = v.mode === 'select' ? 'zoom' : 'select';
        b.textContent = v.mode === 'select' ? 'Drag: select' : 'Drag: zoom';
        if (v.gd && window.Plotly) window.Plotly.relayout(v.gd, {dragmode: v.mode === 'zoom' ? 'zoom' : false});
      });
    v.playButton = button('▶ Play selection', 'play the selected region (space)', function () { playRegion(v); });
    v.loopButton = button('⟳ Loop: off', 'loop the selected region while it plays', function (b) {
      v.loop = !v.loop; b.textContent = v.loop ? '⟳ Loop: on' : '⟳ Loop: off';
      b.classList.toggle('on', v.loop);
    });
    var zoomSel = button('Zoom to selection', 'show the selected region across the plot', function () {
      if (v.region) setRange(v, [v.region.start, v.region.end]);
    });
    var all = button('Show all', 'the whole session (double-click the plot does the same)', function () {
      setRange(v, null);
    });
    v.readout = document.createElement('span');
    v.readout.className = 'kame-readout';
    bar.append(v.modeButton, v.playButton, v.loopButton, zoomSel, all);
    v.regions = [];
    v.snap = name === 'timeline';
    if (name === 'timeline') {
      v.snapButton = button('Snap: 80 ms', 'selections snap to the 80 ms frames of the streams (click: to the pointer)',
        function (b) {
          v.snap = !v.snap; b.textContent = v.snap ? 'Snap: 80 ms' : 'Snap: off'; b.classList.toggle('on', v.snap);
        });
      v.snapButton.classList.add('on');
      var keep = button('+ Region', 'keep the selection as a named region (listed under this bar; the link and the ' +
        'exports keep them)', function () { addRegion(v); });
      var cut = button('Export selection', 'the selection on its own: its stereo WAV and every tier cut to it, one zip',
        function () { exportSelection(v); });
      bar.append(v.snapButton, keep, cut);
    }
    bar.append(v.readout);
    v.overview = document.createElement('canvas');
    v.overview.className = 'kame-overview';
    v.overview.height = 30;
    v.overview.title = 'the whole session: the box is the visible window (click or drag to move it)';
    v.figure = document.createElement('div');
    v.figure.className = 'kame-figure';
    v.regionList = document.createElement('div');
    v.regionList.className = 'kame-regions';
    v.regionList.style.display = 'none';
    box.append(bar, v.regionList, v.overview, v.figure);
    host.prepend(box);
    wireOverview(v);
    wireMouse(v);
    readout(v);
    return v;
  }

  function scan() {
    if (!window.Plotly || !layout()) return;
    VIEWS.forEach(function (name) {
      var host = document.getElementById('kame-plot-' + name);
      if (!host) return;
      var v = state[name];
      if (!v || v.host !== host || !host.contains(v.figure)) v = build(name, host);
      // the server's regions reach the page apart from the figure (an open, a link's regions=)
      if (name === 'timeline' && v.gd && !v.drawing && regionsFromBox(v, false)) drawRegions(v);
      var source = Array.from(host.querySelectorAll('.js-plotly-plot')).find(function (gd) {
        return gd !== v.gd && !(v.figure && v.figure.contains(gd));
      });
      if (!source || !source.data || !source.layout) return;
      if (source === v.source && source.data === v.sourceData && source.layout === v.sourceLayout) return;
      if (v.drawing) return;
      v.source = source; v.sourceData = source.data; v.sourceLayout = source.layout;
      var next = source.layout.meta && source.layout.meta.kame_timeline;
      // the same figure, its playhead moved (the key leaves the lanes' order out: compared apart, so a figure in the
      // order the page has moved its lanes to is not drawn again)
      if (v.gd && next && next.key && next.key === meta(v).key && same(next.lanes, meta(v).lanes)) {
        var head = (source.layout.shapes || []).find(function (s) { return s.name === 'playhead'; });
        hideSource(source);
        var shown = head && head.opacity > 0;
        if (shown && !answered(v, head.x0) && Math.abs(head.x0 - v.t) > 1e-6) {
          seekPlayers(v, head.x0);  // Inspect time typed, or a link's
        }
        return;
      }
      draw(v, source);
    });
  }

  // Gradio's copy of a figure the page has drawn: kept (Gradio draws the next figure into it) but not shown
  function hideSource(source) {
    source.classList.add('kame-source');
    source.style.display = 'none';
  }

  function same(a, b) { return JSON.stringify(a || null) === JSON.stringify(b || null); }
  var CONFIG = {responsive: true, scrollZoom: true, displaylogo: false, doubleClick: 'reset',
    modeBarButtonsToRemove: ['select2d', 'lasso2d', 'autoScale2d']};

  function draw(v, source) {
    var data = structuredClone(source.data), lay = structuredClone(source.layout);
    ticksOnly(data, lay.meta && lay.meta.kame_timeline && lay.meta.kame_timeline.labels);
    v.ticks = tickTraces(data);
    var before = v.gd ? meta(v) : null, range = v.gd ? xRange(v) : null;
    var m = (lay.meta && lay.meta.kame_timeline) || {};
    var kept = before && same(before.runs, m.runs) && before.duration === m.duration && same(before.lanes, m.lanes);
    delete lay.width;
    lay.autosize = true;
    // the figure's box gets the figure's height: Plotly's resize drops layout.height when the width is automatic
    // and then sizes a responsive figure from its box, which had no height of its own -- 0 px after a redraw
    // while the tab was hidden (Talk -> Stop -> Timeline)
    if (lay.height > 0) v.figure.style.height = lay.height + 'px';
    lay.dragmode = v.mode === 'zoom' ? 'zoom' : false;
    if (kept && range) { lay.xaxis = Object.assign({}, lay.xaxis, {range: range, autorange: false}); }
    if (v.name === 'timeline') regionsFromBox(v, !kept);
    lay.shapes = (lay.shapes || []).filter(function (s) { return s.name !== 'selection' && s.name !== 'kame-region'; })
      .concat(regionShapes(v));
    lay.shapes.push({type: 'rect', name: 'selection', xref: 'x', yref: 'paper', x0: 0, x1: 0, y0: 0, y1: 1,
      fillcolor: 'rgba(250, 204, 21, 0.22)', line: {color: 'rgba(202, 138, 4, 0.9)', width: 1}, layer: 'above',
      visible: false});
    var ph = lay.shapes.findIndex(function (s) { return s.name === 'playhead'; });
    var placed = ph >= 0 && lay.shapes[ph].opacity > 0;
    if (!kept) { v.region = null; }
    else if (ph >= 0 && !placed) { lay.shapes[ph].x0 = lay.shapes[ph].x1 = v.t; lay.shapes[ph].opacity = 1; }
    if (placed) v.t = lay.shapes[ph].x0;
    v.drawing = true;
    var started = performance.now(), fresh = !v.gd;
    v.gd = v.figure;
    return window.Plotly.react(v.figure, data, lay, CONFIG).then(function () {
      v.figure.classList.add('kame-figure');
      hideSource(source);
      if (fresh) wireFigure(v);
      K.redraws.push({view: v.name, what: 'figure', ms: performance.now() - started});
      applyLabels(v);
      if (placed) seekPlayers(v, v.t);  // a link's or the inspector's time: the players start there too
      showRegion(v);
      drawOverview(v);
      readout(v);
      v.host.dataset.kamePlayhead = v.t;
    }).finally(function () { v.drawing = false; });
  }

  // ------------------------------------------------------------------------------ labels at every zoom
  // The word labels and the token ticks are not Plotly's: in the page's copy those traces keep only their hover
  // (mode 'none': Plotly draws nothing for them), and the words and ticks are drawn on an SVG of their own over
  // the plot area (.kame-labels), again after every redraw and only for the visible window (timeline-layout.js
  // lays the words out) -- Plotly drawing a few thousand tick markers was most of a zoom's time. A tick moves to
  // its word's row.
  function ticksOnly(data, groups) {
    (groups || []).forEach(function (g) {
      g.traces.forEach(function (index) {
        var trace = data[index];
        if (!trace) return;
        trace.text = [];  // its ticks: tickTraces leaves Plotly their hover only
      });
    });
  }

  // the token-tick traces (markers 'line-ns' with no legend entry of their own): drawn by the page, hovered
  // through Plotly
  function tickTraces(data) {
    var out = [];
    data.forEach(function (trace, index) {
      var marker = trace.marker || {};
      if ((trace.mode || '').indexOf('markers') < 0 || marker.symbol !== 'line-ns' || trace.showlegend !== false) {
        return;
      }
      trace.mode = 'none';  // Plotly draws nothing for it and still hovers its points (where drawTicks puts them)
      out.push(index);
    });
    return out;
  }

  function drawTicks(v, layer) {
    var full = v.gd._fullLayout, size = full._size, paths = {};
    (v.ticks || []).forEach(function (index) {
      var trace = v.gd._fullData[index];
      if (!trace || trace.visible !== true) return;
      var xa = full[trace.xaxis.replace('x', 'xaxis')], ya = full[trace.yaxis.replace('y', 'yaxis')];
      var marker = trace.marker || {}, line = marker.line || {}, half = (marker.size || 7) / 2;
      var ys = (v.rows || {})[index] || trace.y, xs = trace.x, lo = xa.range[0], hi = xa.range[1];
      var points = v.gd.calcdata && v.gd.calcdata[index];
      if (points && ys !== trace.y) {  // hover finds a tick where it is drawn, on its word's row
        for (var k = 0; k < points.length; k++) if (points[k].i !== undefined) points[k].y = ys[points[k].i];
      }
      var dx = xa._offset - size.l, dy = ya._offset - size.t;
      for (var i = 0; i < xs.length; i++) {
        if (!(xs[i] >= lo && xs[i] <= hi)) continue;
        var colour = Array.isArray(line.color) ? line.color[i] : line.color || '#111827';
        var alpha = marker.opacity !== undefined && marker.opacity.length !== undefined ? marker.opacity[i] :
          (marker.opacity === undefined ? 1 : marker.opacity);
        var key = colour + '|' + alpha + '|' + (line.width || 1);
        var x = (dx + xa.c2p(xs[i])).toFixed(1), y = dy + ya.c2p(ys[i]);
        (paths[key] = paths[key] || []).push('M' + x + ' ' + (y - half).toFixed(1) + 'V' + (y + half).toFixed(1));
      }
    });
    while (layer.firstChild) layer.removeChild(layer.firstChild);
    Object.keys(paths).forEach(function (key) {
      var parts = key.split('|'), path = document.createElementNS(SVG, 'path');
      path.setAttribute('d', paths[key].join(''));
      path.setAttribute('stroke', parts[0]); path.setAttribute('stroke-opacity', parts[1]);
      path.setAttribute('stroke-width', parts[2]); path.setAttribute('fill', 'none');
      layer.appendChild(path);
    });
  }

  function traceGroups(gd) {
    var out = {};
    gd.querySelectorAll('.scatterlayer .trace').forEach(function (g) {
      var cd = g.__data__, trace = cd && cd[0] && cd[0].trace;
      if (trace) out[trace.index] = g;
    });
    return out;
  }

  var SVG = 'http://www.w3.org/2000/svg';
  function overlay(v) {
    var size = v.gd._fullLayout._size;
    if (!v.labels || !v.figure.contains(v.labels)) {
      v.labels = document.createElementNS(SVG, 'svg');
      v.labels.setAttribute('class', 'kame-labels');
      v.tickLayer = v.labels.appendChild(document.createElementNS(SVG, 'g'));
      v.wordLayer = v.labels.appendChild(document.createElementNS(SVG, 'g'));
      v.figure.style.position = 'relative';
      v.figure.appendChild(v.labels);
    }
    var style = v.labels.style;
    style.left = size.l + 'px'; style.top = size.t + 'px'; style.width = size.w + 'px'; style.height = size.h + 'px';
    return v.labels;
  }

  function applyLabels(v) {
    var groups = meta(v).labels, full = v.gd && v.gd._fullLayout;
    if (!groups || !full || !full._size) return;
    var started = performance.now(), byTrace = traceGroups(v.gd), size = full._size;
    overlay(v);
    v.rows = {};
    var pieces = [];
    groups.forEach(function (g, n) {
      var first = v.gd._fullData[g.traces[0]];
      if (!first) return;
      var xa = full[first.xaxis.replace('x', 'xaxis')], ya = full[first.yaxis.replace('y', 'yaxis')];
      if (!xa || !ya) return;
      var pxPerS = xa._length / Math.max(1e-6, xa.range[1] - xa.range[0]);
      var out = layout().layoutLabels(g, xa.range[0], xa.range[1], pxPerS);
      var dx = xa._offset - size.l, dy = ya._offset - size.t;
      g.traces.forEach(function (index, k) {
        var trace = v.gd._fullData[index], font = (trace && trace.textfont) || {};
        var text = out.text[k], y = out.y[k], words = g.word[k];
        v.rows[index] = y;  // where its ticks are now (a click finds them there)
        for (var i = 0; i < text.length; i++) {
          if (!text[i]) continue;
          pieces.push({group: n, text: text[i], x: dx + xa.c2p(g.x[words[i]]) + 4, y: dy + ya.c2p(y[i]),
            size: g.font, colour: font.color || '#111827', italic: font.style === 'italic'});
        }
      });
      if (g.note) showNote(v, g.note[0], layout().hiddenNote(out.hidden, g.note[1]));
    });
    drawTicks(v, v.tickLayer);
    var words = v.wordLayer, nodes = words.childNodes;
    while (nodes.length > pieces.length) words.removeChild(words.lastChild);
    pieces.forEach(function (p, i) {
      var node = nodes[i];
      if (!node) {
        node = document.createElementNS(SVG, 'text');
        node.setAttribute('dominant-baseline', 'central');
        words.appendChild(node);
      }
      node.setAttribute('x', p.x.toFixed(1)); node.setAttribute('y', p.y.toFixed(1));
      node.setAttribute('font-size', p.size); node.setAttribute('fill', p.colour);
      node.setAttribute('font-style', p.italic ? 'italic' : 'normal');
      node.setAttribute('data-group', p.group);
      if (node.textContent !== p.text) node.textContent = p.text;
    });
    (meta(v).fits || []).forEach(function (f) {  // each revision's line, cut again to its span's width
      var el = byTrace[f.trace], trace = v.gd._fullData[f.trace];
      if (!el || !trace) return;
      var xa = full[trace.xaxis.replace('x', 'xaxis')];
      var pxPerS = xa._length / Math.max(1e-6, xa.range[1] - xa.range[0]);
      el.querySelectorAll('g.textpoint').forEach(function (tp) {
        var i = tp.__data__ && tp.__data__.i, node = tp.firstChild;
        if (i === undefined || !node || f.text[i] === undefined) return;
        var line = layout().fitText(f.text[i], f.width[i], f.font, pxPerS);
        if (node.textContent !== line) node.textContent = line;
      });
    });
    K.redraws.push({view: v.name, what: 'labels', ms: performance.now() - started});
    placeHandles(v);
  }

  // ------------------------------------------------------------------------------------------ moving lanes
  // Each lane's title is a handle: drag it up or down (or focus it and press ↑ / ↓) to move the lane. The page moves
  // the lanes of every view itself (kameLayout.reorderLanes: each lane's elements by the same number of units) and
  // tells the server the order (the hidden #kame-lane-order box: the link and the Lanes box follow); no figure is
  // sent back or drawn again by the server.
  function yAxes(v) {
    var full = v.gd._fullLayout;
    return Object.keys(full).filter(function (k) { return /^yaxis[0-9]*$/.test(k) && full[k] && full[k]._length; })
      .map(function (k) { return full[k]; });
  }
  function placeHandles(v) {
    var m = meta(v), full = v.gd && v.gd._fullLayout;
    if (!m.lanes || !m.lanes_of || !m.heights || !full || !full._size) return;
    if (!v.handles || !v.figure.contains(v.handles)) {
      v.handles = document.createElement('div');
      v.handles.className = 'kame-lane-handles';
      v.drop = document.createElement('div');
      v.drop.className = 'kame-lane-drop';
      v.handles.appendChild(v.drop);
      v.figure.appendChild(v.handles);
      v.handleOf = {};
      wireHandles(v);
    }
    var bands = layout().laneBands(m.lanes, m.heights), kept = {};
    yAxes(v).forEach(function (ya) {
      m.lanes.forEach(function (lane, i) {
        var key = ya._name + '|' + lane, el = v.handleOf[key];
        if (!el) {
          el = v.handleOf[key] = document.createElement('div');
          el.className = 'kame-lane-handle';
          el.tabIndex = 0;
          el.setAttribute('role', 'button');
          el.dataset.lane = lane;
          el.dataset.axis = ya._name;
          el.title = 'drag to move the lane “' + lane + '” (or ↑ / ↓ while it has the focus)';
          el.setAttribute('aria-label', 'move the lane ' + lane + ' (up or down arrow)');
          v.handles.appendChild(el);
        }
        var top = ya._offset + ya.l2p(bands[lane][1]), bottom = ya._offset + ya.l2p(bands[lane][0]);
        el.style.top = top.toFixed(1) + 'px';
        el.style.height = Math.max(4, bottom - top).toFixed(1) + 'px';
        el.style.width = Math.max(20, full._size.l - 6) + 'px';
        el.dataset.index = i;
        kept[key] = true;
      });
    });
    Object.keys(v.handleOf).forEach(function (key) {  // lanes no longer shown
      if (!kept[key]) { v.handleOf[key].remove(); delete v.handleOf[key]; }
    });
  }
  // the boundary between lanes nearest to clientY on the handle's panel: 0 above the first lane .. n under the last
  function dropIndex(v, axis, clientY) {
    var m = meta(v), ya = v.gd._fullLayout[axis] || v.gd._fullLayout.yaxis;
    var bands = layout().laneBands(m.lanes, m.heights), box = v.figure.getBoundingClientRect(), best = 0, gap = Infinity;
    m.lanes.concat([null]).forEach(function (lane, k) {
      var y = box.top + ya._offset + ya.l2p(lane ? bands[lane][1] : bands[m.lanes[m.lanes.length - 1]][0]);
      if (Math.abs(clientY - y) < gap) { gap = Math.abs(clientY - y); best = k; }
    });
    return {index: best, y: box.top + ya._offset + ya.l2p(best < m.lanes.length ? bands[m.lanes[best]][1] :
      bands[m.lanes[m.lanes.length - 1]][0]) - box.top};
  }
  function wireHandles(v) {
    var drag = null;
    v.handles.addEventListener('pointerdown', function (e) {
      var el = e.target.closest('.kame-lane-handle');
      if (!el || e.button !== 0) return;
      e.preventDefault();
      drag = {el: el, lane: el.dataset.lane, axis: el.dataset.axis, pointer: e.pointerId};
      el.classList.add('dragging');
      try { el.setPointerCapture(e.pointerId); } catch { /* no such pointer (a synthetic one) */ }
    });
    v.handles.addEventListener('pointermove', function (e) {
      if (!drag) return;
      var at = dropIndex(v, drag.axis, e.clientY);
      v.drop.style.top = (at.y - 1).toFixed(1) + 'px';
      v.drop.style.display = 'block';
    });
    function end(e, cancelled) {
      if (!drag) return;
      var d = drag;
      drag = null;
      d.el.classList.remove('dragging');
      v.drop.style.display = 'none';
      if (cancelled) return;
      var order = meta(v).lanes, from = order.indexOf(d.lane), to = dropIndex(v, d.axis, e.clientY).index;
      if (from < 0 || to === from || to === from + 1) return;  // dropped where it was
      moveLanes(layout().movedLane(order, d.lane, to > from ? to - 1 : to));
    }
    v.handles.addEventListener('pointerup', function (e) { end(e, false); });
    v.handles.addEventListener('pointercancel', function (e) { end(e, true); });
    v.handles.addEventListener('keydown', function (e) {
      var el = e.target.closest('.kame-lane-handle');
      if (!el || (e.key !== 'ArrowUp' && e.key !== 'ArrowDown')) return;
      e.preventDefault();
      e.stopPropagation();  // not a step of the playhead
      var order = meta(v).lanes, from = order.indexOf(el.dataset.lane), to = from + (e.key === 'ArrowUp' ? -1 : 1);
      if (from < 0 || to < 0 || to >= order.length) return;
      moveLanes(layout().movedLane(order, el.dataset.lane, to)).then(function () { el.focus(); });
    });
  }
  // every view with these lanes shows them in `order`; the server is told once
  function moveLanes(order) {
    var started = performance.now();
    var jobs = VIEWS.map(function (name) {
      var v = state[name], m = v && v.gd ? meta(v) : {};
      if (!m.lanes || !m.lanes_of || same(m.lanes, order) || m.lanes.length !== order.length ||
          order.some(function (lane) { return m.lanes.indexOf(lane) < 0; })) return null;
      var data = v.gd.data.map(function (t) { return Object.assign({}, t); });
      var lay = Object.assign({}, v.gd.layout);
      ['shapes', 'annotations', 'images'].forEach(function (k) {
        if (lay[k]) lay[k] = lay[k].map(function (item) { return Object.assign({}, item); });
      });
      Object.keys(lay).forEach(function (k) { if (/^yaxis[0-9]*$/.test(k)) lay[k] = Object.assign({}, lay[k]); });
      lay.meta = Object.assign({}, lay.meta, {kame_timeline: Object.assign({}, m, {
        labels: (m.labels || []).map(function (g) { return Object.assign({}, g); })})});
      layout().reorderLanes(data, lay, order);
      v.drawing = true;
      return window.Plotly.react(v.gd, data, lay, CONFIG).then(function () {
        K.redraws.push({view: v.name, what: 'lanes', ms: performance.now() - started});
      }).finally(function () { v.drawing = false; });
    }).filter(Boolean);
    var box = hiddenBox('kame-lane-order');
    if (box && jobs.length) tell(box, order.map(function (lane) { return lane.replace(/ /g, '-'); }).join(','), true);
    return Promise.all(jobs);
  }
  K.moveLanes = function (order) { return moveLanes(order); };  // for tests: what a drag does

  // a lane's "hidden" note says how many words this zoom leaves out (on the SVG: no second redraw)
  function showNote(v, index, text) {
    var g = v.gd.querySelector('.annotation[data-index="' + index + '"]');
    var node = g && g.querySelector('.annotation-text');
    if (!node) return;
    g.setAttribute('visibility', text ? 'visible' : 'hidden');
    if (text && node.textContent !== text) node.textContent = text;
  }
  K.labels = function (name) {  // what each lane prints now, for tests: per group, its words in view, in order
    var v = state[name];
    if (!v || !v.labels) return [];
    var out = (meta(v).labels || []).map(function () { return []; });
    Array.from(v.wordLayer.childNodes).forEach(function (node) {
      var box = node.getBoundingClientRect();
      out[Number(node.getAttribute('data-group'))].push(
        {text: node.textContent, left: box.left, right: box.right, top: box.top, bottom: box.bottom});
    });
    return out;
  };

  function rangeChanged(update) {
    return Object.keys(update).some(function (k) { return /^xaxis[0-9]*\.(range|autorange)/.test(k); });
  }

  function wireFigure(v) {
    v.gd.on('plotly_relayout', function (update) {
      if (!rangeChanged(update)) return;
      applyLabels(v);
      drawOverview(v);
    });
    v.gd.on('plotly_afterplot', function () { applyLabels(v); });
  }

  // time the x axis change (and the labels after it): the redraw a user waits for
  function setRange(v, range) {
    if (!v.gd || !window.Plotly) return Promise.resolve();
    var started = performance.now();
    var update = range ? {'xaxis.range': range, 'xaxis.autorange': false} : {'xaxis.autorange': true};
    return window.Plotly.relayout(v.gd, update).then(function () {
      applyLabels(v);
      K.redraws.push({view: v.name, what: 'zoom', ms: performance.now() - started});
    });
  }
  K.setRange = function (name, range) { return state[name] ? setRange(state[name], range) : Promise.resolve(); };

  // -------------------------------------------------------------------------------- seek and playback
  function movePlayhead(v, t) {
    v.t = t;
    v.host.dataset.kamePlayhead = t;
    if (v.gd) kameSetPlayhead(v.figure, t);
    drawOverview(v);
    readout(v);
  }

  // the view's players and its playhead at t (what the server's Inspect time asks for)
  function seekPlayers(v, t) {
    players(v.name).forEach(function (a) {
      if (Math.abs(a.currentTime - t) > 0.01) a.currentTime = isFinite(a.duration) ? Math.min(t, a.duration) : t;
    });
    movePlayhead(v, t);
  }

  // The times this page sent to Inspect time, oldest first, their answers not yet in. An answer (the figure with its
  // playhead there) that comes back after the cursor moved on is not a seek: keys pressed while it was on its way
  // were lost to it, and End then Home left the cursor at the end.
  function asked(v, t) {
    v.asked = (v.asked || []).concat([t]).slice(-32);
  }
  // whether a playhead at t answers one of those times (it, and every older one, is then in)
  function answered(v, t) {
    var i = (v.asked || []).findIndex(function (a) { return Math.abs(a - t) < 0.006; });
    if (i < 0) return false;
    v.asked.splice(0, i + 1);
    return true;
  }

  var inspectTimer = null;
  function seekView(v, t) {
    t = Math.max(0, Math.min(duration(v) || t, t));
    players(v.name).forEach(function (a) { a.currentTime = isFinite(a.duration) ? Math.min(t, a.duration) : t; });
    movePlayhead(v, t);
    var inspect = v.name === 'timeline' && document.querySelector('#kame-inspect-time input');
    if (inspect) {  // the inspector follows, a moment after the last move (keys repeat)
      clearTimeout(inspectTimer);
      inspectTimer = setTimeout(function () {
        asked(v, t);
        inspect.value = t.toFixed(2);
        inspect.dispatchEvent(new Event('input', {bubbles: true}));
        inspect.dispatchEvent(new KeyboardEvent('keypress', {key: 'Enter', code: 'Enter', bubbles: true}));
      }, 150);
    }
  }
  K.seek = function (name, t) { if (state[name]) seekView(state[name], t); };

  function mediaView(media) {
    var box = media.closest('[id^="kame-audio-"]');
    return box ? state[box.id.split('-')[2]] || null : null;
  }
  function follow(media) {
    var v = mediaView(media);
    if (!v) return;
    if (v.playingRegion) {
      var step = layout().regionStep(media.currentTime, v.region, v.loop);
      if (step.action === 'seek') media.currentTime = step.t;
      else if (step.action === 'pause') { media.pause(); media.currentTime = step.t; v.playingRegion = false; }
    }
    movePlayhead(v, media.currentTime);
    if (!media.paused && !media.ended) requestAnimationFrame(function () { follow(media); });
  }
  ['timeupdate', 'seeked', 'seeking', 'pause', 'loadedmetadata'].forEach(function (kind) {
    document.addEventListener(kind, function (e) {
      if (!(e.target instanceof HTMLMediaElement)) return;
      var v = mediaView(e.target);
      if (v) movePlayhead(v, e.target.currentTime);
      else legacySync(e.target);
    }, true);
  });
  document.addEventListener('play', function (e) {
    if (!(e.target instanceof HTMLMediaElement)) return;
    peers(e.target).forEach(function (m) { if (!m.paused) m.pause(); });  // one player of a view at a time
    var v = mediaView(e.target);
    if (v) v.active = e.target;
    follow(e.target);
  }, true);
  document.addEventListener('seeked', function (e) {
    var media = e.target;
    if (!(media instanceof HTMLMediaElement) || !media.paused) return;
    peers(media).forEach(function (m) {
      if (Math.abs(m.currentTime - media.currentTime) > 0.05) m.currentTime = media.currentTime;
    });
  }, true);
  function peers(media) {
    var box = media.closest('[id^="kame-audio-"]');
    if (!box) return [];
    return players(box.id.split('-')[2]).filter(function (m) { return m !== media; });
  }
  // a player whose view this script does not draw (Live, …): its plot's playhead follows it as before
  function legacySync(media) {
    var box = media.closest('[id^="kame-audio-"]');
    var plot = box && document.getElementById('kame-plot-' + box.id.split('-')[2]);
    if (plot) { kameSetPlayhead(plot, media.currentTime); plot.dataset.kamePlayhead = media.currentTime; }
  }

  function player(v) {
    var all = players(v.name);
    return v.active && all.indexOf(v.active) >= 0 ? v.active : all[0] || null;
  }
  function playRegion(v) {
    var media = player(v);
    if (!media) return;
    if (v.region) {
      media.currentTime = v.region.start;
      v.playingRegion = true;
    }
    media.play();
  }
  function togglePlay(v) {
    var media = player(v);
    if (!media) return;
    if (!media.paused) { media.pause(); return; }
    if (v.region && (v.t < v.region.start || v.t >= v.region.end - 0.01)) playRegion(v);
    else { v.playingRegion = !!v.region; media.play(); }
  }

  // ------------------------------------------------------------------------------------------- regions
  function setRegion(v, sel) {
    v.region = sel;
    v.playingRegion = false;
    showRegion(v);
    drawOverview(v);
    readout(v);
  }
  K.setRegion = function (name, a, b) {
    var v = state[name];
    if (v) setRegion(v, layout().region(a, b, duration(v)));
  };
  function showRegion(v) {
    if (!v.gd || !window.Plotly) return;
    var i = shapeIndex(v, 'selection');
    if (i < 0) return;
    var upd = {}, r = v.region;
    upd['shapes[' + i + '].visible'] = !!r;
    if (r) { upd['shapes[' + i + '].x0'] = r.start; upd['shapes[' + i + '].x1'] = r.end; }
    window.Plotly.relayout(v.gd, upd);
  }
  // ------------------------------------------------------------------------------------ named regions
  function hiddenBox(id) { return document.querySelector('#' + id + ' textarea, #' + id + ' input'); }
  function tell(box, value, submit) {  // as a user typing: Gradio hears input (and Enter: submit)
    box.value = value;
    box.dispatchEvent(new Event('input', {bubbles: true}));
    if (submit) box.dispatchEvent(new KeyboardEvent('keypress', {key: 'Enter', code: 'Enter', bubbles: true}));
  }
  // the regions the server holds, when they are not what this page last sent (an input opened, a link's regions=);
  // whether they were taken
  function regionsFromBox(v, opened) {
    var box = hiddenBox('kame-regions');
    if (!box || (!opened && box.value === v.regionsSent)) return false;
    var given;
    try { given = JSON.parse(box.value || '[]'); } catch { given = []; }
    v.regions = layout().regionList(Array.isArray(given) ? given : []);
    v.regionsSent = box.value;
    renderRegions(v);
    return true;
  }
  function regionsChanged(v) {
    v.regions = layout().regionList(v.regions);
    var box = hiddenBox('kame-regions');
    if (box) { v.regionsSent = JSON.stringify(v.regions); tell(box, v.regionsSent, true); }
    renderRegions(v);
    drawRegions(v);
  }
  function addRegion(v) {
    if (!v.region) { v.readout.textContent = 'select a span first (drag on the plot), then + Region'; return; }
    v.regions.push({name: 'region ' + (v.regions.length + 1), start: v.region.start, end: v.region.end});
    regionsChanged(v);
  }
  K.addRegion = function (name, a, b, label) {  // for tests: what a drag and "+ Region" do
    var v = state[name];
    if (!v) return;
    v.regions.push({name: label || '', start: a, end: b});
    regionsChanged(v);
  };
  K.regions = function (name) { return state[name] ? layout().regionList(state[name].regions) : []; };
  function renderRegions(v) {
    var list = v.regionList;
    if (!list) return;
    list.textContent = '';
    v.regions.forEach(function (r, i) {
      var row = document.createElement('span');
      row.className = 'kame-region';
      var name = document.createElement('input');
      name.value = r.name;
      name.title = 'its name (the exports\' regions tier, the link)';
      name.addEventListener('change', function () { r.name = name.value; regionsChanged(v); });
      var span = button(r.start.toFixed(2) + '–' + r.end.toFixed(2) + ' s', 'select it', function () {
        setRegion(v, {start: r.start, end: r.end});
      });
      var drop = button('✕', 'delete this region', function () { v.regions.splice(i, 1); regionsChanged(v); });
      row.append(name, span, drop);
      list.append(row);
    });
    list.style.display = v.regions.length ? '' : 'none';
  }
  function regionShapes(v) {
    return (v.regions || []).map(function (r) {
      return {type: 'rect', name: 'kame-region', xref: 'x', yref: 'y domain', x0: r.start, x1: r.end, y0: 0, y1: 1,
        fillcolor: 'rgba(0, 114, 178, 0.06)', line: {color: 'rgba(0, 114, 178, 0.55)', width: 1, dash: 'dot'},
        layer: 'below', label: {text: r.name, textposition: 'top left', font: {size: 10, color: '#0072B2'}}};
    });
  }
  function drawRegions(v) {
    if (!v.gd || !window.Plotly || !v.gd.layout) return;
    var shapes = (v.gd.layout.shapes || []).filter(function (s) { return s.name !== 'kame-region'; })
      .concat(regionShapes(v));
    window.Plotly.relayout(v.gd, {shapes: shapes});
  }
  // "Export selection": the server writes the zip and answers with a link whose data-ask is this request's
  function exportSelection(v) {
    var box = hiddenBox('kame-selection');
    if (!box) return;
    if (!v.region) { v.readout.textContent = 'select a span first (drag on the plot), then Export selection'; return; }
    v.asks = (v.asks || 0) + 1;
    var ask = 'ask-' + v.asks + '-' + Date.now();
    tell(box, JSON.stringify({start: v.region.start, end: v.region.end, ask: ask}), true);
    var tries = 0;
    (function follow() {
      var link = document.querySelector('#kame-export-selection[data-ask="' + ask + '"]');
      if (link) { link.click(); return; }
      if (++tries < 300) setTimeout(follow, 100);
    })();
  }

  function readout(v) {
    if (!v.readout) return;
    var r = v.region;
    v.readout.textContent = 'cursor ' + v.t.toFixed(2) + ' s (frame ' + Math.floor(v.t / 0.08 + 1e-6) + ')' +
      (r ? ' · selection ' + r.start.toFixed(2) + '–' + r.end.toFixed(2) + ' s (' +
        (r.end - r.start).toFixed(2) + ' s)' : ' · drag on the plot to select a region');
    if (v.playButton) v.playButton.disabled = !r;
  }

  // the time under a point of the plot area (null outside it)
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

  function wireMouse(v) {
    var down = null;
    v.figure.addEventListener('mousedown', function (e) {
      if (e.button !== 0 || e.target.closest('.legend, .modebar, .annotation')) { down = null; return; }
      var t = timeAt(v.gd, e.clientX, e.clientY);
      down = t === null ? null : {x: e.clientX, y: e.clientY, t: t, at: Date.now(), dragging: false};
    }, true);
    window.addEventListener('mousemove', function (e) {
      if (!down || v.mode !== 'select') return;
      if (!down.dragging && Math.abs(e.clientX - down.x) <= 4) return;
      down.dragging = true;
      var t = timeAt(v.gd, e.clientX, down.y);
      if (t === null) return;
      var sel = layout().region(down.t, t, duration(v));
      setRegion(v, v.snap ? layout().snapRegion(sel, duration(v)) : sel);
    }, true);
    window.addEventListener('mouseup', function (e) {
      var d = down;
      down = null;
      if (!d) return;
      if (d.dragging) return;  // a region was selected
      if (Math.abs(e.clientX - d.x) > 4 || Math.abs(e.clientY - d.y) > 4 || Date.now() - d.at > 600) return;
      var frame = tokenAt(v, e.clientX, e.clientY);  // a token under the pointer: its frame, exactly
      if (frame !== null) seekView(v, frame * layout().FRAME);
      else if (d.t >= 0) seekView(v, d.t);
    }, true);
  }

  // the frame of the token tick nearest a point of the plot (within a few px), else null
  function tokenAt(v, clientX, clientY) {
    var full = v.gd._fullLayout, box = v.gd.getBoundingClientRect(), best = null, bestD = 7;
    (v.gd._fullData || []).forEach(function (trace) {
      if (SNAP_TRACES.indexOf(trace.name) < 0 || !trace.customdata || trace.visible !== true) return;
      var xa = full[trace.xaxis.replace('x', 'xaxis')], ya = full[trace.yaxis.replace('y', 'yaxis')];
      var px = clientX - box.left - xa._offset, py = clientY - box.top - ya._offset;
      var lo = xa.p2l(px - bestD), hi = xa.p2l(px + bestD), xs = trace.x, ys = (v.rows || {})[trace.index] || trace.y;
      for (var i = 0; i < xs.length; i++) {
        if (xs[i] < lo || xs[i] > hi) continue;
        var d = Math.max(Math.abs(xa.l2p(xs[i]) - px), Math.abs(ya.l2p(ys[i]) - py) / 2);
        if (d < bestD) { bestD = d; best = trace.customdata[i][0]; }
      }
    });
    return best;
  }

  // ------------------------------------------------------------------------------------ overview strip
  function envelopes(v) {
    // the first panel's two waveforms: each is a pair of traces (top edge, then bottom edge filled to it)
    var out = [];
    ['user audio', 'output audio'].forEach(function (lane) {
      var pair = (v.gd._fullData || []).filter(function (t) {
        return (t.xaxis || 'x') === 'x' && typeof t.name === 'string' && t.name.slice(-lane.length - 3) === ' · ' + lane;
      });
      if (pair.length >= 2) out.push({top: pair[0], bottom: pair[1]});
    });
    return out;
  }
  function drawOverview(v) {
    var c = v.overview;
    if (!c || !v.gd || !v.gd._fullLayout) return;
    var width = c.clientWidth;
    if (width <= 0) return;
    if (c.width !== width) c.width = width;
    var g = c.getContext('2d'), H = c.height, D = duration(v) || 1;
    if (!v.waves || v.waves.width !== width || v.waves.data !== v.gd._fullData) {  // drawn once per figure and width
      v.waves = document.createElement('canvas');
      v.waves.width = width; v.waves.height = H; v.waves.data = v.gd._fullData;
      drawWaves(v, v.waves.getContext('2d'), width, H, D);
    }
    g.clearRect(0, 0, width, H);
    g.drawImage(v.waves, 0, 0);
    drawWindow(v, g, width, H, D);
  }
  function drawWaves(v, g, width, H, D) {
    g.fillStyle = '#f4f6f9'; g.fillRect(0, 0, width, H);
    var waves = envelopes(v), band = H / Math.max(1, waves.length);
    waves.forEach(function (w, k) {
      var top = w.top.y, bottom = w.bottom.y, n = top && bottom ? Math.min(top.length, bottom.length) : 0;
      if (!n) return;
      var lo = Infinity, hi = -Infinity;
      for (var i = 0; i < n; i++) { if (bottom[i] < lo) lo = bottom[i]; if (top[i] > hi) hi = top[i]; }
      var mid = (lo + hi) / 2, half = Math.max(1e-6, (hi - lo) / 2), x0 = w.top.x0 || 0, dx = w.top.dx || 0.01;
      g.fillStyle = k === 0 ? '#4477AA' : '#CC6677';
      var step = Math.max(1, Math.floor(n / width));
      for (var j = 0; j < n; j += step) {
        var x = (x0 + j * dx) / D * width;
        var a = mid + (bottom[j] - mid), b = mid + (top[j] - mid);
        var yTop = band * k + band / 2 - (b - mid) / half * (band / 2 - 2);
        var yBottom = band * k + band / 2 - (a - mid) / half * (band / 2 - 2);
        g.fillRect(x, yTop, Math.max(1, step * dx / D * width), Math.max(1, yBottom - yTop));
      }
    });
  }
  function drawWindow(v, g, width, H, D) {
    var r = xRange(v), left = Math.max(0, r[0] / D * width), right = Math.min(width, r[1] / D * width);
    if (v.region) {
      g.fillStyle = 'rgba(250, 204, 21, 0.35)';
      g.fillRect(v.region.start / D * width, 0, (v.region.end - v.region.start) / D * width, H);
    }
    g.fillStyle = 'rgba(17, 24, 39, 0.08)';
    g.fillRect(0, 0, left, H); g.fillRect(right, 0, width - right, H);
    g.strokeStyle = '#111827'; g.lineWidth = 1.5; g.strokeRect(left + 0.75, 0.75, Math.max(2, right - left - 1.5), H - 1.5);
    var px = v.t / D * width;
    g.strokeStyle = '#111827'; g.lineWidth = 1; g.beginPath(); g.moveTo(px, 0); g.lineTo(px, H); g.stroke();
  }
  function wireOverview(v) {
    var dragging = false;
    function moveTo(e) {
      var box = v.overview.getBoundingClientRect(), D = duration(v);
      if (!D || box.width <= 0) return;
      var r = xRange(v), span = Math.min(D, r[1] - r[0]);
      var centre = (e.clientX - box.left) / box.width * D;
      var start = Math.max(0, Math.min(D - span, centre - span / 2));
      setRange(v, [start, start + span]);
    }
    v.overview.addEventListener('mousedown', function (e) { dragging = true; moveTo(e); e.preventDefault(); });
    window.addEventListener('mousemove', function (e) { if (dragging) moveTo(e); });
    window.addEventListener('mouseup', function () { dragging = false; });
  }

  // ------------------------------------------------------------------------------------------ keyboard
  function activeView() {
    for (var i = 0; i < VIEWS.length; i++) {
      var v = state[VIEWS[i]];
      if (v && v.gd && v.figure.offsetParent !== null) return v;
    }
    return null;
  }
  document.addEventListener('keydown', function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var target = e.target;
    if (target && target.closest && target.closest('input, textarea, select, [contenteditable=""], ' +
        '[contenteditable="true"]')) return;
    var v = activeView();
    if (!v) return;
    if (e.key === ' ' || e.code === 'Space') {
      if (target && target.closest && target.closest('button')) return;  // a focused button's own space
      e.preventDefault();
      togglePlay(v);
      return;
    }
    var t = layout().stepTime(v.t, e.key, e.shiftKey, duration(v));
    if (t === null) return;
    e.preventDefault();
    var media = player(v);
    if (media && !media.paused) media.pause();
    seekView(v, t);
    var r = xRange(v);  // keep the cursor in view, as Praat scrolls with it
    if (t < r[0] || t > r[1]) {
      var span = r[1] - r[0], start = Math.max(0, Math.min((duration(v) || span) - span, t - span / 2));
      setRange(v, [start, start + span]);
    }
  });

  // a figure drawn while its tab was hidden takes its box's width when the tab shows it (on the next frame: resizing
  // inside the observer's callback would make the browser report a ResizeObserver loop as an error)
  var sized = new ResizeObserver(function (entries) {
    entries.forEach(function (entry) {
      var v = viewOf(entry.target);
      if (v && v.gd && window.Plotly && entry.contentRect.width > 0) {
        requestAnimationFrame(function () {
          // a new width is a new zoom in px per second: the labels are laid out again for it
          Promise.resolve(window.Plotly.Plots.resize(v.gd)).then(function () {
            applyLabels(v);
            drawOverview(v);
          });
        });
      }
    });
  });

  // Gradio resizes its own copy of each figure, which the page keeps hidden (hideSource): Plotly refuses a hidden
  // div with an error nobody catches, one per resize -- there is nothing to lay out, so that copy is left as it is
  function quietSourceResize() {
    var plots = window.Plotly && window.Plotly.Plots;
    if (!plots || plots.resize.kameQuiet) return;
    var resize = plots.resize;
    var quiet = function (gd) {
      if (gd && gd.classList && gd.classList.contains('kame-source')) return Promise.resolve(gd);
      return resize.apply(this, arguments);
    };
    quiet.kameQuiet = true;
    plots.resize = quiet;
  }

  // the address bar is the view: it follows "Link to this view" (its query; replaced, not pushed -- the page does not
  // go back to a view on Back), so a copied address shares what the page shows. A Talk session's claim (its secret)
  // stays out of it, as the page's token does: the history list and a shared screen would show it; the link box
  // still has it for the person who made the session
  var linked = null;
  function followLink() {
    var box = document.querySelector('#kame-link textarea, #kame-link input');
    var value = box ? box.value.trim() : '';
    if (!value || value === linked || !window.history || !history.replaceState) return;
    linked = value;
    var search;
    try { search = new URL(value, location.href).search; } catch { return; }
    var kept = search.replace(/^\?/, '').split('&').filter(function (part) {
      return part && part.split('=')[0] !== 'claim';
    });
    var query = kept.length ? '?' + kept.join('&') : '';
    if (query && query !== location.search) {
      history.replaceState(history.state, '', location.pathname + query + location.hash);
    }
  }

  var watched = new WeakSet();
  setInterval(function () {
    quietSourceResize();
    followLink();
    scan();
    VIEWS.forEach(function (name) {
      var v = state[name];
      if (v && v.figure && !watched.has(v.figure)) { watched.add(v.figure); sized.observe(v.figure); }
    });
  }, 200);
})();
