// The timeline's logic that is not drawing (window.kameLayout in the page; a module under node, tests/js):
// word labels laid out again at every zoom, stepping the playhead by frames and seconds, and a selected region
// played once or looped. The figure says which labels there are (layout.meta.kame_timeline.labels, written by
// demo/timeline.py: per lane of a run, its traces, rows, font size, words and where each starts).
(function (root) {
  'use strict';
  var FRAME = 0.08;

  // the width of a label in px, as demo/timeline.py estimates it (its tick and a gap included)
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

  // a line cut with '…' to widthS seconds at pxPerS, as demo/timeline.py cuts it at the overview ('' when not
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
  // JSON the page sends the server (demo/regions.py reads it)
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

  var api = {FRAME: FRAME, textWidthPx: textWidthPx, layoutLabels: layoutLabels, fitText: fitText, hiddenNote: hiddenNote,
    stepTime: stepTime, region: region, regionStep: regionStep, snapRegion: snapRegion, regionList: regionList};
  if (typeof module === 'object' && module.exports) module.exports = api;
  else root.kameLayout = api;
})(this);
