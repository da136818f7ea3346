/* profplug ab page: draws the plots from the JSON in #ab-data (plotly.js is inlined). */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("ab-data").textContent);
  var cfg = {displaylogo: false, responsive: true};
  function color(p) { return D.colors[p] || "#9d9d9d"; }

  // Each run's step-time distribution: precomputed box statistics, one trace per policy.
  var boxes = D.policies.map(function (p) {
    var runs = D.runs.filter(function (r) { return r.policy === p && r.q; });
    return {
      type: "box", name: p, marker: {color: color(p)},
      x: runs.map(function (r) { return r.label + (r.ok ? "" : " (failed)"); }),
      lowerfence: runs.map(function (r) { return r.q[0]; }),
      q1: runs.map(function (r) { return r.q[1]; }),
      median: runs.map(function (r) { return r.q[2]; }),
      q3: runs.map(function (r) { return r.q[3]; }),
      upperfence: runs.map(function (r) { return r.q[4]; })
    };
  });
  var order = D.runs.filter(function (r) { return r.q; })
    .map(function (r) { return r.label + (r.ok ? "" : " (failed)"); });
  Plotly.newPlot("ab-plot-runs", boxes, {
    height: 380, margin: {t: 10}, yaxis: {title: "us per step"},
    xaxis: {categoryorder: "array", categoryarray: order}
  }, cfg);

  // Median and 95% CI per policy, with the round medians as dots.
  var withMed = D.summary.filter(function (s) { return s.median !== null; });
  var ci = [{
    type: "scatter", mode: "markers", name: "median (95% CI)",
    x: withMed.map(function (s) { return s.policy; }),
    y: withMed.map(function (s) { return s.median; }),
    marker: {size: 12, color: withMed.map(function (s) { return color(s.policy); })},
    error_y: {type: "data", symmetric: false,
              array: withMed.map(function (s) { return s.ci[1] - s.median; }),
              arrayminus: withMed.map(function (s) { return s.median - s.ci[0]; })}
  }];
  D.summary.forEach(function (s) {
    var v = s.rounds.filter(function (x) { return x !== null; });
    ci.push({type: "scatter", mode: "markers", name: s.policy + " rounds", showlegend: false,
             x: v.map(function () { return s.policy; }), y: v,
             marker: {size: 6, symbol: "circle-open", color: color(s.policy)}});
  });
  Plotly.newPlot("ab-plot-ci", ci, {height: 320, margin: {t: 10},
                                    yaxis: {title: "us per step"}}, cfg);

  // Speedup over device with its CI, and the no-difference line.
  var sp = D.summary.filter(function (s) { return s.speedup !== null && s.speedup_ci; });
  Plotly.newPlot("ab-plot-speedup", [{
    type: "scatter", mode: "markers", name: "speedup (95% CI)",
    x: sp.map(function (s) { return s.policy; }), y: sp.map(function (s) { return s.speedup; }),
    marker: {size: 12, color: sp.map(function (s) { return color(s.policy); })},
    error_y: {type: "data", symmetric: false,
              array: sp.map(function (s) { return s.speedup_ci[1] - s.speedup; }),
              arrayminus: sp.map(function (s) { return s.speedup - s.speedup_ci[0]; })}
  }], {height: 300, margin: {t: 10}, yaxis: {title: "x device"},
       shapes: [{type: "line", xref: "paper", x0: 0, x1: 1, y0: 1, y1: 1,
                 line: {dash: "dot", color: "#888"}}]}, cfg);

  // Pooled step-time histograms, and the what-if prediction against them.
  var H = D.hist, hist = [], shapes = [], notes = [];
  if (H.edges) {
    var mids = [];
    for (var i = 0; i + 1 < H.edges.length; i++) { mids.push((H.edges[i] + H.edges[i + 1]) / 2); }
    D.policies.forEach(function (p) {
      if (H[p]) {
        hist.push({type: "bar", name: p, x: mids, y: H[p], opacity: 0.6,
                   marker: {color: color(p)}});
      }
    });
  }
  if (D.whatif) {
    var W = D.whatif;
    if (W.band && W.band[1] > W.band[0]) {
      shapes.push({type: "rect", yref: "paper", y0: 0, y1: 1, x0: W.band[0], x1: W.band[1],
                   fillcolor: "#333", opacity: 0.08, line: {width: 0}});
    }
    [["predicted", "dash", "what-if"], ["traced", "dashdot", "what-if, traced host"],
     ["recorded", "dot", "traced device run"]].forEach(function (w, i) {
      var x = W[w[0]];
      if (x === null || x === undefined) { return; }
      shapes.push({type: "line", yref: "paper", y0: 0, y1: 1, x0: x, x1: x,
                   line: {dash: w[1], width: 2, color: "#333"}});
      notes.push({x: x, yref: "paper", y: 1, yshift: 14 * i, text: w[2], showarrow: false,
                  yanchor: "bottom"});
    });
  }
  Plotly.newPlot("ab-plot-hist", hist, {
    height: 360, margin: {t: 60}, barmode: "overlay", bargap: 0,
    xaxis: {title: "us per step"}, yaxis: {title: "steps"}, shapes: shapes, annotations: notes
  }, cfg);
  document.documentElement.setAttribute("data-rendered", "4");
})();
