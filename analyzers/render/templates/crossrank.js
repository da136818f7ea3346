/* profplug cross-rank section: swimlane, launch-queue depth and host lead plots.
   Each section carries its data in <script type="application/json" class="xr-data">; this
   code may be embedded once per section, so it runs once, after the page (and plotly) load. */
(function () {
  "use strict";
  if (window.__profplugCrossRank) { return; }
  window.__profplugCrossRank = true;
  var cfg = {displaylogo: false, responsive: true};

  function lines(s, e, y, dy) {
    var x = [], yy = [];
    for (var i = 0; i < s.length; i++) {
      x.push(s[i], e[i], null);
      yy.push(y[i] + dy, y[i] + dy, null);
    }
    return {x: x, y: yy};
  }

  function swimlane(el, sw, C) {
    var traces = [], n = sw.rows.length, width = Math.max(6, Math.min(22, 260 / n));
    function band(name, d, color, dy, w) {
      if (!d || !d.s.length) { return; }
      var l = lines(d.s, d.e, d.y, dy);
      traces.push({type: "scatter", mode: "lines", name: name, x: l.x, y: l.y,
                   line: {color: color, width: w}, hoverinfo: "skip"});
    }
    ["compute", "transfer", "peer_wait", "comm_unmatched"].forEach(function (k) {
      band(k.replace("_", " "), sw.ops[k], C[k], 0, width);
    });
    Object.keys(sw.gaps).forEach(function (c) {
      band("idle: " + c.replace("_", " "), sw.gaps[c], C[c], 0, width);
    });
    var h = sw.handoffs, hx = [], hy = [];
    for (var i = 0; i < h.x0.length; i++) {
      hx.push(h.x0[i], h.x1[i], null);
      hy.push(h.y0[i], h.y1[i], null);
    }
    if (hx.length) {
      traces.push({type: "scatter", mode: "lines+markers", name: "send \u2192 recv", x: hx,
                   y: hy, line: {color: C.handoff, width: 1},
                   marker: {size: 4, color: C.handoff}, hoverinfo: "skip"});
    }
    var p = sw.path;
    if (p.s.length) {
      var pl = lines(p.s, p.e, p.y, -0.42), text = [], mx = [], my = [];
      for (var j = 0; j < p.s.length; j++) {
        mx.push((p.s[j] + p.e[j]) / 2);
        my.push(p.y[j] - 0.42);
        text.push("critical path: " + p.cat[j] + " " + (p.e[j] - p.s[j]).toFixed(1) + " us");
      }
      traces.push({type: "scatter", mode: "lines", name: "critical path", x: pl.x, y: pl.y,
                   line: {color: C.path, width: 3}, hoverinfo: "skip"});
      traces.push({type: "scatter", mode: "markers", name: "critical path (hover)",
                   showlegend: false, x: mx, y: my, hovertext: text, hoverinfo: "text",
                   marker: {color: C.path, size: 3, opacity: 0.4}});
    }
    var shapes = sw.bounds.slice(0, -1).map(function (b) {
      return {type: "line", x0: b, x1: b, y0: -0.8, y1: n - 0.2,
              line: {color: "#888", width: 1, dash: "dash"}};
    });
    return Plotly.newPlot(el, traces, {
      height: Math.max(220, 34 * n + 120), margin: {t: 20, r: 10, l: 70},
      legend: {orientation: "h"}, shapes: shapes, hovermode: "closest",
      xaxis: {title: {text: "us"}, zeroline: false},
      yaxis: {tickvals: sw.rows.map(function (_, i) { return i; }), ticktext: sw.rows,
              autorange: "reversed", range: [n - 0.4, -0.8]}}, cfg);
  }

  function queue(el, sw) {
    var traces = sw.queue.map(function (q, i) {
      return {type: "scatter", mode: "lines", name: sw.rows[i], x: q.t, y: q.depth,
              line: {shape: "hv", width: 1.5}};
    });
    return Plotly.newPlot(el, traces, {
      height: 260, margin: {t: 20, r: 10}, legend: {orientation: "h"},
      xaxis: {title: {text: "us"}}, yaxis: {title: {text: "ops queued"}}}, cfg);
  }

  function lead(el, d) {
    var traces = d.ranks.map(function (r) {
      return {type: "scatter", mode: "lines+markers", name: "rank " + r.rank,
              x: d.steps.length ? d.steps : r.lead.map(function (_, i) { return i; }),
              y: r.lead};
    });
    return Plotly.newPlot(el, traces, {
      height: 260, margin: {t: 20, r: 10}, legend: {orientation: "h"},
      xaxis: {title: {text: "step"}}, yaxis: {title: {text: "median host lead us"},
                                              rangemode: "tozero"}}, cfg);
  }

  function draw() {
    var blocks = document.querySelectorAll("script.xr-data");
    Array.prototype.forEach.call(blocks, function (s) {
      var d = JSON.parse(s.textContent), id = s.getAttribute("data-for");
      var sw = d.swimlane;
      if (sw) {
        swimlane(document.getElementById(id + "-swim"), sw, d.colors);
        queue(document.getElementById(id + "-queue"), sw);
      }
      lead(document.getElementById(id + "-lead"), d.lead);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    window.setTimeout(draw, 0);
  }
})();
