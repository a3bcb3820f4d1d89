// The Talk page's two AudioWorklet processors (loaded with audioWorklet.addModule; see talk.js):
// 'kame-capture' cuts the microphone into 1920-sample (80 ms at 24 kHz) frames for the page to send;
// 'kame-player' plays the answer's PCM from a ring buffer and reports the RMS it played.
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
registerProcessor('kame-player', KamePlayer);