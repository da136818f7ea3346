/* profplug HTML report: draws the plots from the embedded JSON and makes tables sortable. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("profplug-data").textContent);
  var cfg = {displaylogo: false, responsive: true};
  var C = data.colors;
  var GL = (function () {  /* WebGL when the browser has it, else SVG (slower, same look) */
    try {
      var c = document.createElement("canvas");
      return !!(c.getContext("webgl") || c.getContext("experimental-webgl"));
    } catch (err) { return false; }
  })() ? "scattergl" : "scatter";

  function barsPlot(el) {
    var b = data.bars, traces = [];
    b.parts.forEach(function (p) {
      traces.push({type: "bar", name: p, x: b.rows, y: b[p], marker: {color: C[p]},
                   hovertemplate: "%{x}<br>" + p + ": %{y:,.1f} us<extra></extra>"});
    });
    traces.push({type: "scatter", mode: "markers", name: "stream wait (overlaps)", x: b.rows,
                 y: b.stream_wait, marker: {color: C.stream_wait, symbol: "diamond", size: 11},
                 hovertemplate: "%{x}<br>stream wait: %{y:,.1f} us<extra></extra>"});
    return Plotly.newPlot(el, traces, {
      barmode: "stack", height: 420, margin: {t: 30, r: 10}, legend: {orientation: "h"},
      yaxis: {title: {text: "us (GPU window)"}}, xaxis: {type: "category"}}, cfg);
  }

  function segments(s, e, y) {
    var x = new Array(s.length * 3), yy = new Array(s.length * 3);
    for (var i = 0; i < s.length; i++) {
      x[3 * i] = s[i]; x[3 * i + 1] = e[i]; x[3 * i + 2] = null;
      yy[3 * i] = y[i]; yy[3 * i + 1] = y[i]; yy[3 * i + 2] = null;
    }
    return {x: x, y: yy};
  }

  function timelinePlot(el) {
    var t = data.timeline, traces = [], strs = t.strings, width = 14;
    var busy = segments(t.busy.s, t.busy.e, t.busy.y);
    traces.push({type: GL, mode: "lines", name: "busy", x: busy.x, y: busy.y,
                 line: {color: C.busy, width: width}, hoverinfo: "skip"});
    data.causes.forEach(function (c) {
      var g = t.gaps[c];
      if (!g.s.length) { return; }
      var sg = segments(g.s, g.e, g.y), mx = [], text = [];
      for (var i = 0; i < g.s.length; i++) {
        mx.push((g.s[i] + g.e[i]) / 2);
        text.push("<b>" + c + "</b> " + (g.e[i] - g.s[i]).toFixed(3) + " us<br>at " +
                  g.s[i].toFixed(3) + " us<br>API: " + (strs[g.api[i]] || "-") +
                  "<br>call site: " + (strs[g.site[i]] || "-"));  /* escaped in Python */
      }
      traces.push({type: GL, mode: "lines", name: c, legendgroup: c, x: sg.x,
                   y: sg.y, line: {color: C[c], width: width}, hoverinfo: "skip"});
      traces.push({type: GL, mode: "markers", name: c + " (hover)", legendgroup: c,
                   showlegend: false, x: mx, y: g.y, hovertext: text, hoverinfo: "text",
                   marker: {color: C[c], size: 5, opacity: 0.6}});
    });
    var n = t.rows.length;
    return Plotly.newPlot(el, traces, {
      height: Math.max(220, 60 + 34 * n), margin: {t: 30, l: 170, r: 10},
      hovermode: "closest", legend: {orientation: "h"},
      xaxis: {title: {text: "us since the run's first GPU op"}},
      yaxis: {tickvals: t.rows.map(function (_, i) { return i; }), ticktext: t.rows,
              autorange: "reversed", range: [n - 0.5, -0.5], zeroline: false}}, cfg);
  }

  function sortable(table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col].getAttribute("data-v"), y = b.cells[col].getAttribute("data-v");
          var nx = parseFloat(x), ny = parseFloat(y), r;
          if (!isNaN(nx) && !isNaN(ny)) { r = nx - ny; } else { r = String(x).localeCompare(y); }
          return asc ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), sortable);
  var jobs = [];
  var eb = document.getElementById("plot-bars"), et = document.getElementById("plot-timeline");
  if (eb && data.bars.rows.length) { jobs.push(barsPlot(eb)); }
  if (et && data.timeline.rows.length) { jobs.push(timelinePlot(et)); }
  Promise.all(jobs).then(function () {
    document.documentElement.setAttribute("data-rendered", String(jobs.length));
  });
})();
