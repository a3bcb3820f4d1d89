// The timeline's logic that is not drawing (window.kameLayout in the page; a module under node, tests/js):
// word labels laid out again at every zoom, stepping the playhead by frames and seconds, and a selected region
// played once or looped. The figure says which labels there are (layout.meta.kame_timeline.labels, written by
// demo/figures/timeline.py: per lane of a run, its traces, rows, font size, words and where each starts).
(function (root) {
  'use strict';
  var FRAME = 0.08;

  // the width of a label in px, as demo/figures/canvas.py estimates it (its tick and a gap included)
  function textWidthPx(text, fontPx) {
    return String(text).length * fontPx * 0.6 + 10;
  }

  // one lane's labels for the visible time range [x0, x1] at pxPerS: per trace, each point's text ('' where
  // the word has no room, or the point does not lead its word) and y (its word's row); hidden: how many words
  // in view were not printed. Below the group's min_px_per_s nothing is printed (and nothing counts as hidden).
  function layoutLabels(group, x0, x1, pxPerS) {
    var rows = group.rows, n = group.labels.length, rowOf = new Array(n), hidden = 0;
    var show = pxPerS >= (group.min_px_per_s || 0) && pxPerS > 0 && isFinite(pxPerS);
    var ends = rows.map(function () { return -Infinity; });
    for (var w = 0; w < n; w++) {
      rowOf[w] = -1;
      var x = group.x[w];
      if (!show || x > x1) continue;
      var width = textWidthPx(group.labels[w], group.font) / pxPerS;
      if (x + width < x0) continue;  // wholly left of the view: neither printed nor counted
      for (var r = 0; r < rows.length; r++) {
        if (ends[r] <= x) { rowOf[w] = r; ends[r] = x + width; break; }
      }
      if (rowOf[w] < 0) hidden++;
    }
    var text = [], y = [];
    group.word.forEach(function (words, k) {
      var lead = group.lead[k], tt = new Array(words.length), yy = new Array(words.length);
      for (var i = 0; i < words.length; i++) {
        var word = words[i], row = rowOf[word];
        tt[i] = lead[i] && row >= 0 ? group.labels[word] : '';
        yy[i] = rows[row >= 0 ? row : word % rows.length];
      }
      text.push(tt); y.push(yy);
    });
    return {text: text, y: y, hidden: hidden};
  }

  // a line cut with '…' to widthS seconds at pxPerS, as demo/figures/canvas.py cuts it at the overview ('' when not
  // even one character and the ellipsis fit)
  function fitText(text, widthS, fontPx, pxPerS) {
    var room = Math.floor((widthS * pxPerS - 6) / (fontPx * 0.6));
    if (text.length <= room) return text;
    return room >= 2 ? text.slice(0, room - 1).replace(/\s+$/, '') + '…' : '';
  }

  // the "hidden" note of a lane for a count of words (or pieces) without room ('' when none)
  function hiddenNote(count, noun) {
    if (!count) return '';
    var one = noun.replace(/s$/, '');
    return count + ' ' + (count === 1 ? one : noun) + ' hidden at this zoom — hover their ticks';
  }

  // the playhead after a key: ←/→ to the next frame boundary (80 ms grid) that way, with shift one second,
  // Home / End the start / end; null for any other key
  function stepTime(t, key, shift, duration) {
    var next;
    if (key === 'Home') next = 0;
    else if (key === 'End') next = duration;
    else if (key === 'ArrowLeft' || key === 'ArrowRight') {
      var sign = key === 'ArrowLeft' ? -1 : 1;
      var at = t / FRAME;
      next = shift ? t + sign : (sign > 0 ? Math.floor(at + 1e-6) + 1 : Math.ceil(at - 1e-6) - 1) * FRAME;
    } else return null;
    return Math.max(0, Math.min(duration, Math.round(next * 1000) / 1000));
  }

  // a region from two times in either order, within [0, duration]; null when shorter than one frame
  function region(a, b, duration) {
    var start = Math.max(0, Math.min(a, b)), end = Math.min(duration, Math.max(a, b));
    return end - start >= FRAME ? {start: start, end: end} : null;
  }

  // a region with both ends on the 80 ms frame grid (the nearest boundary; at least one frame, within
  // [0, duration]): what a drag selects while "Snap" is on; null for null
  function snapRegion(sel, duration) {
    if (!sel) return null;
    var last = Math.floor(duration / FRAME + 1e-6);
    var a = Math.min(Math.round(sel.start / FRAME), last), b = Math.min(Math.round(sel.end / FRAME), last);
    if (b <= a) {  // under a frame: the frame that holds its start
      a = Math.min(Math.floor(sel.start / FRAME + 1e-6), last - 1);
      b = a + 1;
    }
    if (a < 0) return null;
    return {start: Math.round(a * FRAME * 1000) / 1000, end: Math.round(b * FRAME * 1000) / 1000};
  }

  // the named regions in time order, each {name, start, end} with a name (default "region N") and ms times; the
  // JSON the page sends the server (demo/open/regions.py reads it)
  function regionList(regions) {
    return (regions || []).filter(function (r) { return r && r.end > r.start; }).map(function (r, i) {
      return {name: String(r.name || '').trim() || 'region ' + (i + 1),
        start: Math.round(r.start * 1000) / 1000, end: Math.round(r.end * 1000) / 1000};
    }).sort(function (x, y) { return x.start - y.start || x.end - y.end; });
  }

  // what a player playing a region does at time t: go on, jump back to its start (looping), or stop at its end
  function regionStep(t, sel, loop) {
    if (!sel || t < sel.end) return {action: 'continue'};
    return loop ? {action: 'seek', t: sel.start} : {action: 'pause', t: sel.end};
  }

  // ------------------------------------------------------------------------------------------ moving lanes
  // A panel's y axis is in lane units, the lanes stacked from the top in meta.lanes' order, each meta.heights[lane]
  // tall; meta.lanes_of names each element's lane (demo/figures/lane_tags.py). Moving lanes moves every element of a lane by
  // the same number of units: nothing else changes, so the page does it itself.

  // each lane's [bottom, top] for an order
  function laneBands(order, heights) {
    var top = order.reduce(function (sum, lane) { return sum + heights[lane]; }, 0), out = {};
    order.forEach(function (lane) { out[lane] = [top - heights[lane], top]; top -= heights[lane]; });
    return out;
  }

  // the numbers of a data array as Plotly holds it: a list (null for a gap), a typed array, or the typed-array
  // spec plotly.py writes ({dtype, bdata: base64, shape})
  var DTYPES = {f4: Float32Array, f8: Float64Array, i1: Int8Array, u1: Uint8Array, i2: Int16Array, u2: Uint16Array,
    i4: Int32Array, u4: Uint32Array};
  function numbers(values) {
    if (values && typeof values === 'object' && typeof values.bdata === 'string' && DTYPES[values.dtype]) {
      var raw = atob(values.bdata);  // the page's and node's (16+)
      var bytes = new Uint8Array(raw.length);
      for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
      return new DTYPES[values.dtype](bytes.buffer);
    }
    return values;
  }
  function shifted(values, dy) {
    var ys = numbers(values);
    if (ys === null || ys === undefined || typeof ys.length !== 'number') return typeof ys === 'number' ? ys + dy : ys;
    if (!Array.isArray(ys)) {  // a typed array: one of its own kind (a float one; integers would round)
      var out = new (ys instanceof Float32Array ? Float32Array : Float64Array)(ys.length);
      for (var k = 0; k < ys.length; k++) out[k] = ys[k] + dy;
      return out;
    }
    return ys.map(function (y) { return y === null || y === undefined ? y : y + dy; });
  }

  // the figure (data, layout; changed in place) with its lanes in `order` (the same lanes, another order); throws
  // on another set of lanes. Returns the distance each lane moved (lane units).
  function reorderLanes(data, layout, order) {
    var m = layout.meta && layout.meta.kame_timeline, was = m && m.lanes, tags = m && m.lanes_of;
    if (!was || !tags || !m.heights) throw new Error('this figure does not say where its lanes are');
    if (order.length !== was.length || order.some(function (lane) { return was.indexOf(lane) < 0; }) ||
        new Set(order).size !== order.length) {
      throw new Error('the lanes to show are ' + was.join(', ') + ', each once');
    }
    var before = laneBands(was, m.heights), after = laneBands(order, m.heights), moved = {};
    was.forEach(function (lane) { moved[lane] = after[lane][0] - before[lane][0]; });
    function by(lane) { return lane ? moved[lane] || 0 : 0; }
    data.forEach(function (trace, i) {
      var dy = by(tags.data[i]);
      if (!dy) return;
      if (trace.type === 'bar') trace.base = shifted(trace.base, dy);  // a bar stands on its base, y long
      else trace.y = shifted(trace.y, dy);
    });
    var top = order[0];
    (layout.shapes || []).forEach(function (shape, i) {
      var lane = tags.shapes[i], dy = by(lane), name = String(shape.name || '');
      if (!lane) return;
      if (name.indexOf('lane-line:') === 0) {  // the line at a lane's top: none over the top lane
        shape.y0 = shape.y1 = after[lane][1];
        shape.visible = lane !== top;
      } else if (name.indexOf('lane-fill:') === 0) {  // the top lane's background reaches the top of the plot
        var ya = layout['yaxis' + String(shape.yref || 'y').slice(1)];  // y -> yaxis, y2 -> yaxis2
        var ceiling = ya && ya.range ? ya.range[1] : after[lane][1];
        shape.y0 = after[lane][0];
        shape.y1 = lane === top ? ceiling : after[lane][1];
      } else if (dy) {
        shape.y0 += dy; shape.y1 += dy;
      }
    });
    (layout.annotations || []).forEach(function (note, i) {
      var dy = by(tags.annotations[i]);
      if (dy) note.y += dy;
    });
    (layout.images || []).forEach(function (image, i) {
      var dy = by(tags.images[i]);
      if (dy) image.y += dy;
    });
    (m.labels || []).forEach(function (group) {
      var dy = by(tags.data[group.traces[0]]);
      if (dy) group.rows = group.rows.map(function (r) { return r + dy; });
    });
    Object.keys(layout).forEach(function (key) {  // each panel's lane titles, at the lanes' new centres
      var axis = layout[key];
      if (!/^yaxis[0-9]*$/.test(key) || !axis || !axis.tickvals || !axis.ticktext) return;
      var title = {};
      was.forEach(function (lane, k) { title[lane] = axis.ticktext[k]; });
      axis.tickvals = order.map(function (lane) { return (after[lane][0] + after[lane][1]) / 2; });
      axis.ticktext = order.map(function (lane) { return title[lane]; });
    });
    m.lanes = order.slice();
    return moved;
  }

  // the order with `lane` moved to index `to` (counted in the order without it)
  function movedLane(order, lane, to) {
    var rest = order.filter(function (other) { return other !== lane; });
    if (rest.length === order.length) return order.slice();
    rest.splice(Math.max(0, Math.min(rest.length, to)), 0, lane);
    return rest;
  }

  var api = {FRAME: FRAME, laneBands: laneBands, reorderLanes: reorderLanes, movedLane: movedLane, textWidthPx: textWidthPx, layoutLabels: layoutLabels, fitText: fitText, hiddenNote: hiddenNote,
    stepTime: stepTime, region: region, regionStep: regionStep, snapRegion: snapRegion, regionList: regionList};
  if (typeof module === 'object' && module.exports) module.exports = api;
  else root.kameLayout = api;
})(this);
