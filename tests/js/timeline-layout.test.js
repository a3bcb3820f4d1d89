// demo/static/timeline-layout.js: labels at every zoom, keyboard steps, regions.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const L = require('../../demo/static/timeline-layout.js');

// ten words, one every 0.24 s (three frames), two rows, one trace; "Canberra." is word 7
function lane() {
  const labels = ['What', 'is', 'the', 'capital', 'of', 'Australia?', 'It', 'Canberra.', 'yes', 'indeed'];
  return {rows: [3.0, 2.7], font: 11.5, labels, x: labels.map((_, i) => i * 0.24),
    word: [labels.map((_, i) => i)], lead: [labels.map(() => 1)], min_px_per_s: 0, note: null};
}

test('at a wide zoom words are left out, and each zoom in prints more until every word fits', () => {
  const g = lane();
  let before = -1;
  for (const pxPerS of [20, 60, 120, 240, 400]) {
    const out = L.layoutLabels(g, 0, 2.4, pxPerS);
    const printed = out.text[0].filter(Boolean).length;
    assert.equal(printed + out.hidden, g.labels.length, `every word in view is printed or counted (${pxPerS})`);
    assert.ok(printed >= before, `zooming in never prints fewer words (${pxPerS})`);
    before = printed;
  }
  assert.ok(L.layoutLabels(g, 0, 2.4, 20).hidden > 0);
  assert.equal(L.layoutLabels(g, 0, 2.4, 400).hidden, 0);
});

test('printed labels never overlap on a row, at any zoom', () => {
  const g = lane();
  for (const pxPerS of [30, 75, 150, 300]) {
    const out = L.layoutLabels(g, 0, 2.4, pxPerS);
    const byRow = new Map();
    out.text[0].forEach((t, i) => {
      if (!t) return;
      const row = out.y[0][i];
      const spans = byRow.get(row) || [];
      const start = g.x[i], end = start + L.textWidthPx(t, g.font) / pxPerS;
      for (const [a, b] of spans) assert.ok(end <= a + 1e-9 || start >= b - 1e-9, `${t} overlaps (${pxPerS})`);
      spans.push([start, end]);
      byRow.set(row, spans);
    });
  }
});

test('a word hidden at the overview is printed once its window is zoomed into', () => {
  const g = lane();
  const overview = L.layoutLabels(g, 0, 2.4, 25);
  const hidden = overview.text[0].findIndex((t) => t === '');
  assert.ok(hidden > 0, 'some word has no room at 25 px/s');
  const x = g.x[hidden];
  const zoomed = L.layoutLabels(g, x - 0.1, x + 0.4, 900 / 0.5);  // a 0.5 s window across 900 px
  assert.equal(zoomed.text[0][hidden], g.labels[hidden]);
  assert.equal(zoomed.text[0][0], '', 'words wholly left of the view are not printed');
  assert.equal(zoomed.hidden, 0);
});

test('pieces of one word are printed once, at the piece that leads it, on the word\'s row', () => {
  const g = {rows: [1, 2], font: 10, labels: ['Canberra.'], x: [0.0],
    word: [[0, 0, 0]], lead: [[1, 0, 0]], min_px_per_s: 0};
  const out = L.layoutLabels(g, 0, 1, 500);
  assert.deepEqual(out.text[0], ['Canberra.', '', '']);
  assert.deepEqual(out.y[0], [1, 1, 1]);
});

test('a close-zoom lane prints nothing until its zoom', () => {
  const g = Object.assign(lane(), {min_px_per_s: 150});
  const idle = L.layoutLabels(g, 0, 2.4, 100);
  assert.deepEqual(idle.text, [g.labels.map(() => '')]);
  assert.equal(idle.hidden, 0);
  assert.ok(L.layoutLabels(g, 0, 2.4, 600).text[0].filter(Boolean).length > 0);
});

test('the hidden note counts what is left out', () => {
  assert.equal(L.hiddenNote(0, 'words'), '');
  assert.equal(L.hiddenNote(1, 'words'), '1 word hidden at this zoom — hover their ticks');
  assert.equal(L.hiddenNote(3, 'pieces'), '3 pieces hidden at this zoom — hover their ticks');
});

test('keys step the playhead by a frame, a second, or to either end', () => {
  assert.equal(L.stepTime(1.04, 'ArrowRight', false, 10), 1.12, 'one frame from a frame boundary');
  assert.equal(L.stepTime(1.04, 'ArrowLeft', false, 10), 0.96);
  assert.equal(L.stepTime(1.0, 'ArrowRight', false, 10), 1.04, 'to the next boundary from between two');
  assert.equal(L.stepTime(1.0, 'ArrowLeft', false, 10), 0.96);
  assert.equal(L.stepTime(1.0, 'ArrowRight', true, 10), 2.0);
  assert.equal(L.stepTime(0.5, 'ArrowLeft', true, 10), 0);
  assert.equal(L.stepTime(9.5, 'ArrowRight', true, 10), 10);
  assert.equal(L.stepTime(4, 'Home', false, 10), 0);
  assert.equal(L.stepTime(4, 'End', false, 10), 10);
  assert.equal(L.stepTime(4, 'a', false, 10), null);
});

test('a region is ordered, clipped to the session and at least a frame long; looping jumps back', () => {
  assert.deepEqual(L.region(3, 1, 10), {start: 1, end: 3});
  assert.deepEqual(L.region(-2, 12, 10), {start: 0, end: 10});
  assert.equal(L.region(1, 1.05, 10), null);
  const sel = {start: 1, end: 2};
  assert.deepEqual(L.regionStep(1.5, sel, true), {action: 'continue'});
  assert.deepEqual(L.regionStep(2.01, sel, true), {action: 'seek', t: 1});
  assert.deepEqual(L.regionStep(2.01, sel, false), {action: 'pause', t: 2});
  assert.deepEqual(L.regionStep(5, null, true), {action: 'continue'});
});

test('a revision\'s line is cut to its span, and whole once the span is wide enough', () => {
  const text = 'The capital of Australia is Canberra.';
  const narrow = L.fitText(text, 0.5, 10, 100);  // 50 px: 7 characters
  assert.ok(narrow.endsWith('…') && narrow.length <= 7, narrow);
  assert.equal(L.fitText(text, 0.5, 10, 1000), text);
  assert.equal(L.fitText(text, 0.01, 10, 100), '');
});

test('a snapped region has both ends on the 80 ms grid, at least a frame, within the session', () => {
  assert.deepEqual(L.snapRegion({start: 1.03, end: 2.17}, 10), {start: 1.04, end: 2.16});
  assert.deepEqual(L.snapRegion({start: 1.0, end: 1.02}, 10), {start: 0.96, end: 1.04}, 'one frame at least');
  assert.deepEqual(L.snapRegion({start: 9.9, end: 10}, 10), {start: 9.92, end: 10}, 'the last whole frame');
  assert.equal(L.snapRegion(null, 10), null);
});

test('the region list is named, in time order, in milliseconds, without empty spans', () => {
  assert.deepEqual(L.regionList([{name: ' b ', start: 3.00049, end: 4}, {name: '', start: 1, end: 2},
    {name: 'empty', start: 5, end: 5}]), [{name: 'region 2', start: 1, end: 2}, {name: 'b', start: 3, end: 4}]);
  assert.deepEqual(L.regionList(null), []);
});

test('a lane moved to another place: the others keep their order, and each lane its height', () => {
  const order = ['events', 'user audio', 'inner monologue', 'output audio', 'oracle stream'];
  assert.deepEqual(L.movedLane(order, 'oracle stream', 0),
    ['oracle stream', 'events', 'user audio', 'inner monologue', 'output audio']);
  assert.deepEqual(L.movedLane(order, 'events', 4), ['user audio', 'inner monologue', 'output audio', 'oracle stream',
    'events']);
  assert.deepEqual(L.movedLane(order, 'events', 99), L.movedLane(order, 'events', 4));
  assert.deepEqual(L.movedLane(order, 'floor', 0), order, 'a lane not shown moves nothing');
  const heights = {a: 1, b: 0.5, c: 2};
  assert.deepEqual(L.laneBands(['a', 'b', 'c'], heights), {a: [2.5, 3.5], b: [2, 2.5], c: [0, 2]});
  assert.deepEqual(L.laneBands(['c', 'a', 'b'], heights), {c: [1.5, 3.5], a: [0.5, 1.5], b: [0, 0.5]});
});

test('moving lanes shifts each lane\'s elements, whatever form its numbers take, and nothing without a lane', () => {
  const f32 = new Float32Array([0.25, 0.75]);
  const spec = {dtype: 'f4', bdata: Buffer.from(f32.buffer).toString('base64')};
  const data = [{y: spec}, {y: [1.5, null, 1.6]}, {type: 'bar', base: 1.1, y: [0.5]}, {y: [9]}];
  const layout = {yaxis: {range: [0, 2.3], tickvals: [1.5, 0.5], ticktext: ['A', 'B']},
    shapes: [{name: 'lane-line:top', y0: 2, y1: 2, visible: false}, {name: 'lane-line:bottom', y0: 1, y1: 1},
      {name: 'lane-fill:top', yref: 'y', y0: 1, y1: 2.3}, {y0: 0.1, y1: 0.2}, {yref: 'paper', y0: 0, y1: 1}],
    annotations: [{y: 1.9}], images: [{y: 0.9}],
    meta: {kame_timeline: {lanes: ['top', 'bottom'], heights: {top: 1, bottom: 1},
      lanes_of: {data: ['bottom', 'top', 'top', null], shapes: ['top', 'bottom', 'top', 'bottom', null],
        annotations: ['top'], images: ['bottom']},
      labels: [{traces: [1], rows: [1.5, 1.2]}]}}};
  const moved = L.reorderLanes(data, layout, ['bottom', 'top']);
  assert.deepEqual(moved, {top: -1, bottom: 1});
  assert.deepEqual(Array.from(data[0].y), [1.25, 1.75]);
  assert.ok(data[0].y instanceof Float32Array);
  assert.deepEqual(data[1].y, [0.5, null, 0.6000000000000001]);
  assert.equal(data[2].base, 0.10000000000000009);
  assert.deepEqual(data[2].y, [0.5], 'a bar moves on its base');
  assert.deepEqual(data[3].y, [9], 'no lane: not moved');
  assert.deepEqual(layout.shapes.map((s) => [s.y0, s.y1, s.visible]),
    [[1, 1, true], [2, 2, false], [0, 1, undefined], [1.1, 1.2, undefined], [0, 1, undefined]]);
  assert.equal(layout.annotations[0].y, 0.8999999999999999);
  assert.equal(layout.images[0].y, 1.9);
  assert.deepEqual(layout.yaxis.tickvals, [1.5, 0.5]);
  assert.deepEqual(layout.yaxis.ticktext, ['B', 'A']);
  assert.deepEqual(layout.meta.kame_timeline.labels[0].rows, [0.5, 0.19999999999999996]);
  assert.deepEqual(layout.meta.kame_timeline.lanes, ['bottom', 'top']);
  assert.throws(() => L.reorderLanes(data, layout, ['top']), /each once/);
  // the top lane moved down: its fill ends at its top; the lane now on top reaches the top of the plot
  L.reorderLanes(data, layout, ['top', 'bottom']);
  assert.deepEqual([layout.shapes[2].y0, layout.shapes[2].y1], [1, 2.3]);
});
