// kame_core/serve/page/static/protocol.js: the Talk page's reading and writing of live-protocol messages.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const P = require('../../kame_core/serve/page/static/protocol.js');

test('PCM round-trips through a 0x08 message within one 16-bit step', () => {
  const frame = Float32Array.from({length: 1920}, (_, i) => 0.5 * Math.sin(2 * Math.PI * 220 * i / 24000));
  const msg = P.encodePcm(frame);
  assert.equal(msg[0], 0x08);
  assert.equal(msg.length, 1 + 2 * 1920);
  const back = P.decode(msg.buffer);
  assert.equal(back.kind, 'pcm');
  assert.equal(back.samples.length, 1920);
  for (let i = 0; i < frame.length; i++) assert.ok(Math.abs(back.samples[i] - frame[i]) < 1 / 16000, `sample ${i}`);
  assert.ok(Math.abs(P.rms(back.samples) - 0.5 / Math.SQRT2) < 1e-3);
});

test('samples beyond full scale are clipped and NaN is sent as silence', () => {
  const msg = P.encodePcm(Float32Array.from([2, -7, NaN, Infinity, -Infinity]));
  const view = new DataView(msg.buffer);
  assert.deepEqual([1, 3, 5, 7, 9].map((o) => view.getInt16(o, true)), [32767, -32767, 0, 32767, -32767]);
});

test('a PCM message with an odd byte count drops its last byte instead of throwing', () => {
  const msg = new Uint8Array([0x08, 0x00, 0x40, 0x7f]);  // one sample (0x4000 = 0.5), then a stray byte
  const back = P.decode(msg);
  assert.deepEqual(Array.from(back.samples), [0.5]);
});

test('a PCM message read from inside a larger buffer uses only its own bytes', () => {
  const whole = new Uint8Array([9, 9, 0x08, 0x00, 0xc0, 9]);
  const back = P.decode(whole.subarray(2, 5));
  assert.deepEqual(Array.from(back.samples), [-0.5]);
});

test('text, events, the handshake and the end control', () => {
  const piece = new Uint8Array([0x02, ...new TextEncoder().encode(' Canberra.')]);
  assert.deepEqual(P.decode(piece), {kind: 'text', text: ' Canberra.'});
  assert.deepEqual(P.decode(new Uint8Array([0x00])), {kind: 'handshake'});
  const end = P.encodeJson({type: 'end'});
  assert.equal(end[0], 0x07);
  assert.deepEqual(P.decode(end), {kind: 'event', event: {type: 'end'}});
  assert.equal(P.decode(new Uint8Array([])), null);
});

test('what cannot be read is named, not thrown', () => {
  const broken = P.decode(new Uint8Array([0x07, ...new TextEncoder().encode('{"type": ')]));
  assert.equal(broken.kind, 'bad');
  assert.match(broken.error, /not JSON/);
  const unknown = P.decode(new Uint8Array([0x42, 1, 2]));
  assert.deepEqual([unknown.kind, unknown.code], ['bad', 0x42]);
  assert.equal(P.rms(new Float32Array(0)), 0);
});
