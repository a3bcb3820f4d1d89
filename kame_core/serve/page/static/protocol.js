// The live protocol's messages as the Talk page reads and writes them (docs/protocol.md): one kind byte, then
// 0x00 handshake · 0x02 a text piece (UTF-8) · 0x07 a JSON event or control · 0x08 raw PCM, 16-bit
// little-endian mono at 24 kHz. In the page it is window.kameProtocol; under node (tests/js) a module.
(function (root) {
  'use strict';
  var KIND = {handshake: 0, text: 2, json: 7, pcm: 8};

  // root mean square of a block of samples (0 for an empty one)
  function rms(samples) {
    if (!samples.length) return 0;
    var ss = 0;
    for (var i = 0; i < samples.length; i++) ss += samples[i] * samples[i];
    return Math.sqrt(ss / samples.length);
  }

  // float samples (-1..1; beyond is clipped, NaN is silence) as one 0x08 message
  function encodePcm(samples) {
    var msg = new Uint8Array(1 + samples.length * 2), view = new DataView(msg.buffer);
    msg[0] = KIND.pcm;
    for (var i = 0; i < samples.length; i++) {
      var s = samples[i];
      s = s !== s ? 0 : Math.max(-1, Math.min(1, s));  // s !== s: NaN
      view.setInt16(1 + 2 * i, Math.round(s * 32767), true);
    }
    return msg;
  }

  // a control message (e.g. {type: 'end'}) as one 0x07 message
  function encodeJson(value) {
    var body = new TextEncoder().encode(JSON.stringify(value)), msg = new Uint8Array(1 + body.length);
    msg[0] = KIND.json;
    msg.set(body, 1);
    return msg;
  }

  // one message from the server (an ArrayBuffer or a Uint8Array): {kind: 'handshake'}, {kind: 'text', text},
  // {kind: 'event', event}, {kind: 'pcm', samples}; {kind: 'bad', code, error} for what cannot be read
  // (an event that is not JSON, PCM of an odd number of bytes: its last byte is dropped), null when empty
  function decode(data) {
    var bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
    if (!bytes.length) return null;
    var kind = bytes[0], body = bytes.subarray(1);
    if (kind === KIND.handshake) return {kind: 'handshake'};
    if (kind === KIND.text) return {kind: 'text', text: new TextDecoder().decode(body)};
    if (kind === KIND.json) {
      try {
        return {kind: 'event', event: JSON.parse(new TextDecoder().decode(body))};
      } catch (err) {
        return {kind: 'bad', code: kind, error: 'an event that is not JSON: ' + err.message};
      }
    }
    if (kind === KIND.pcm) {
      var n = body.length >> 1, view = new DataView(body.buffer, body.byteOffset, n * 2), samples = new Float32Array(n);
      for (var i = 0; i < n; i++) samples[i] = view.getInt16(2 * i, true) / 32768;
      return {kind: 'pcm', samples: samples};
    }
    return {kind: 'bad', code: kind, error: 'an unknown message kind ' + kind};
  }

  var api = {KIND: KIND, rms: rms, encodePcm: encodePcm, encodeJson: encodeJson, decode: decode};
  if (typeof module === 'object' && module.exports) module.exports = api;
  else root.kameProtocol = api;
})(this);
