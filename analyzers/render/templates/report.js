/* profplug HTML report: draws the timeline from the embedded JSON and makes tables sortable.
   Strings from the JSON reach the screen only as text (textContent, canvas fillText). */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("profplug-data").textContent);
  var C = data.colors, T = data.timeline, causes = data.causes;

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

  /* ---------------------------------------------------------------- timeline (canvas) */
  var main = document.getElementById("tl-main"), ov = document.getElementById("tl-overview");
  var tip = document.getElementById("tl-tip");
  if (!main || !T || !T.rows.length) {
    document.documentElement.setAttribute("data-rendered", "0");
    return;
  }
  var n = T.rows.length, LABEL = 160, AXIS = 28, ROW = 24, BAR = 16, RIGHT = 12;
  var OV_ROW = Math.max(3, Math.min(10, Math.floor(60 / n))), OV_PAD = 4;
  var fmt = new Intl.NumberFormat("en-US", {maximumFractionDigits: 3});

  /* per row: busy span index ranges, and every gap (all causes) sorted by start */
  function ranges(y) {
    var lo = new Array(n).fill(0), hi = new Array(n).fill(0), i;
    for (i = y.length - 1; i >= 0; i--) { lo[y[i]] = i; }
    for (i = 0; i < y.length; i++) { hi[y[i]] = i + 1; }
    return {lo: lo, hi: hi};
  }
  var busyR = ranges(T.busy.y), rowGaps = [], r, k;
  /* NCCL time and its peer wait, over the busy spans: each quantity in its colour */
  var SP = T.spans || {}, layers = [["comm", T.parts && T.parts.indexOf("transfer") >= 0 ?
    C.transfer : C.comm], ["peer_wait", C.peer_wait]].filter(function (l) {
      return SP[l[0]] && SP[l[0]].s.length; }).map(function (l) {
      return {d: SP[l[0]], color: l[1], r: ranges(SP[l[0]].y)}; });
  for (r = 0; r < n; r++) { rowGaps.push([]); }
  causes.forEach(function (c, ci) {
    var g = T.gaps[c];
    for (var i = 0; i < g.s.length; i++) { rowGaps[g.y[i]].push([g.s[i], g.e[i], ci, i]); }
  });
  rowGaps.forEach(function (a) { a.sort(function (p, q) { return p[0] - q[0]; }); });

  var full = [0, Math.max(T.end, 1e-3)], view = (T.view || full).slice();

  function size(canvas, h) {
    var dpr = window.devicePixelRatio || 1, w = canvas.clientWidth || 800;
    canvas.style.height = h + "px";
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    var ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return {ctx: ctx, w: w, h: h};
  }

  function first(arr, lo, hi, t) { /* first index in [lo, hi) whose value >= t */
    while (lo < hi) { var m = (lo + hi) >> 1; if (arr[m] < t) { lo = m + 1; } else { hi = m; } }
    return lo;
  }

  function fill(ctx, x, y, h, d, lo, hi, v0, v1) { /* one row's spans [lo, hi) of d */
    for (var i = first(d.e, lo, hi, v0); i < hi && d.s[i] <= v1; i++) {
      var a = Math.round(x(d.s[i])), b = Math.round(x(d.e[i]));
      ctx.fillRect(a, y, Math.max(b - a, 1), h);
    }
  }

  function spans(ctx, x, y0, h, v0, v1) { /* busy spans and gaps of every row */
    for (var row = 0; row < n; row++) {
      var y = y0(row);
      ctx.fillStyle = C.compute;  /* GPU work; NCCL time and its peer wait drawn over it */
      fill(ctx, x, y, h, T.busy, busyR.lo[row], busyR.hi[row], v0, v1);
      layers.forEach(function (l) {
        ctx.fillStyle = l.color;
        fill(ctx, x, y, h, l.d, l.r.lo[row], l.r.hi[row], v0, v1);
      });
      var gaps = rowGaps[row];
      for (var j = 0; j < gaps.length; j++) {
        var g = gaps[j];
        if (g[1] < v0 || g[0] > v1) { continue; }
        var ga = Math.round(x(g[0])), gb = Math.round(x(g[1]));
        if (gb > ga) { ctx.fillStyle = C[causes[g[2]]]; ctx.fillRect(ga, y, gb - ga, h); }
      }
    }
  }

  function ticks(v0, v1, px) {
    var raw = (v1 - v0) / Math.max(px / 110, 1), mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * mag; })
      .filter(function (s) { return s >= raw; })[0], out = [];
    for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) { out.push(t); }
    return out;
  }

  function drawMain() {
    var c = size(main, AXIS + n * ROW + 6), ctx = c.ctx, pw = c.w - LABEL - RIGHT;
    var v0 = view[0], v1 = view[1];
    function x(t) { return LABEL + (t - v0) / (v1 - v0) * pw; }
    ctx.clearRect(0, 0, c.w, c.h);
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ctx.fillStyle = "#666";
    ctx.textAlign = "left";
    ctx.fillText("us since the run's first GPU op", 4, 10);
    ticks(v0, v1, pw).forEach(function (t) {
      var xx = Math.round(x(t)) + 0.5;
      ctx.fillStyle = "#e6e6e6";
      ctx.fillRect(Math.round(x(t)), AXIS - 4, 1, n * ROW + 4);
      ctx.fillStyle = "#444";
      ctx.textAlign = "center";
      ctx.fillText(fmt.format(t), xx, AXIS - 12);
    });
    ctx.fillStyle = "#222";  /* step starts: a tick under the axis labels */
    (T.steps || []).forEach(function (t) {
      if (t >= v0 && t <= v1) { ctx.fillRect(Math.round(x(t)), AXIS - 6, 1, 6); }
    });
    ctx.textAlign = "right";
    for (var row = 0; row < n; row++) {
      var label = T.rows[row];
      while (label.length > 3 && ctx.measureText(label).width > LABEL - 12) {
        label = label.slice(0, -2) + "…";
      }
      ctx.fillText(label, LABEL - 8, AXIS + row * ROW + ROW / 2);
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL, AXIS, pw, n * ROW);
    ctx.clip();
    spans(ctx, x, function (row) { return AXIS + row * ROW + (ROW - BAR) / 2; }, BAR, v0, v1);
    ctx.restore();
  }

  function drawOverview() {
    var c = size(ov, 2 * OV_PAD + n * OV_ROW), ctx = c.ctx, pw = c.w - LABEL - RIGHT;
    function x(t) { return LABEL + (t - full[0]) / (full[1] - full[0]) * pw; }
    ctx.clearRect(0, 0, c.w, c.h);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    ctx.fillStyle = "#666";
    ctx.fillText("whole window", LABEL - 8, c.h / 2);
    spans(ctx, x, function (row) { return OV_PAD + row * OV_ROW; }, Math.max(OV_ROW - 1, 2),
          full[0], full[1]);
    var a = x(view[0]), b = x(view[1]);
    ctx.fillStyle = "rgba(255,255,255,0.72)";
    ctx.fillRect(LABEL, 0, Math.max(a - LABEL, 0), c.h);
    ctx.fillRect(b, 0, Math.max(LABEL + pw - b, 0), c.h);
    ctx.strokeStyle = "#222";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(a, 0.75, Math.max(b - a, 2), c.h - 1.5);
  }

  function draw() {
    drawMain();
    drawOverview();
    main.parentNode.setAttribute("data-view", view[0] + "," + view[1]);  /* for tests */
  }

  function setView(v0, v1) {
    var span = Math.max(v1 - v0, 1e-3), total = full[1] - full[0];
    if (span >= total) { view = full.slice(); draw(); return; }
    if (v0 < full[0]) { v0 = full[0]; }
    if (v0 + span > full[1]) { v0 = full[1] - span; }
    view = [v0, v0 + span];
    draw();
  }

  function zoom(f, at) {
    var c = at === undefined ? (view[0] + view[1]) / 2 : at;
    setView(c - (c - view[0]) * f, c + (view[1] - c) * f);
  }

  function timeAt(canvas, ev, range) {
    var rect = canvas.getBoundingClientRect(), pw = rect.width - LABEL - RIGHT;
    return range[0] + (ev.clientX - rect.left - LABEL) / pw * (range[1] - range[0]);
  }

  /* main plot: drag to pan, Ctrl/Cmd + wheel to zoom, hover a gap for its details */
  var drag = null;
  main.addEventListener("pointerdown", function (ev) {
    drag = {x: ev.clientX, v: view.slice()};
    main.setPointerCapture(ev.pointerId);
    tip.hidden = true;
  });
  main.addEventListener("pointermove", function (ev) {
    if (drag) {
      var pw = main.getBoundingClientRect().width - LABEL - RIGHT;
      var dt = (ev.clientX - drag.x) / pw * (drag.v[1] - drag.v[0]);
      setView(drag.v[0] - dt, drag.v[1] - dt);
      return;
    }
    hover(ev);
  });
  main.addEventListener("pointerup", function () { drag = null; });
  main.addEventListener("pointerleave", function () { tip.hidden = true; });
  main.addEventListener("wheel", function (ev) {
    if (!ev.ctrlKey && !ev.metaKey) { return; }
    ev.preventDefault();
    zoom(ev.deltaY > 0 ? 1.25 : 0.8, timeAt(main, ev, view));
  }, {passive: false});

  function waitAt(row, t, slack) { /* the peer-wait span of a row under t, or null */
    var l = layers.filter(function (x) { return x.d === SP.peer_wait; })[0];
    if (!l) { return null; }
    var lo = l.r.lo[row], hi = l.r.hi[row], i = first(l.d.e, lo, hi, t - slack);
    return i < hi && l.d.s[i] <= t + slack ? [l.d.s[i], l.d.e[i]] : null;
  }

  function hover(ev) {
    var rect = main.getBoundingClientRect(), row = Math.floor((ev.clientY - rect.top - AXIS) / ROW);
    var t = timeAt(main, ev, view), slack = 4 / (rect.width - LABEL - RIGHT) * (view[1] - view[0]);
    var gaps = row >= 0 && row < n ? rowGaps[row] : [], best = null;
    for (var i = 0; i < gaps.length && gaps[i][0] <= t + slack; i++) {
      if (gaps[i][1] >= t - slack) { best = gaps[i]; }
    }
    var w = !best && row >= 0 && row < n ? waitAt(row, t, slack) : null;
    if ((!best && !w) || ev.clientX - rect.left < LABEL) { tip.hidden = true; return; }
    if (w) {  /* a NCCL peer wait */
      tip.textContent = "NCCL peer wait  " + fmt.format(w[1] - w[0]) + " us\nat " +
        fmt.format(w[0]) + " us (" + T.rows[row] + ")";
    } else {
      var c = causes[best[2]], g = T.gaps[c], s = T.strings;
      tip.textContent = c + "  " + fmt.format(best[1] - best[0]) + " us\n" +
        "at " + fmt.format(best[0]) + " us (" + T.rows[row] + ")\n" +
        "API: " + (s[g.api[best[3]]] || "-") + "\ncall site: " + (s[g.site[best[3]]] || "-");
    }
    tip.hidden = false;
    var box = main.parentNode.getBoundingClientRect(), left = ev.clientX - box.left + 14;
    tip.style.left = Math.min(left, box.width - tip.offsetWidth - 4) + "px";
    tip.style.top = (ev.clientY - box.top + 14) + "px";
  }

  /* overview strip: drag the window to move it, its edges to resize, elsewhere to pick */
  var odrag = null;
  ov.addEventListener("pointerdown", function (ev) {
    var t = timeAt(ov, ev, full), px = (full[1] - full[0]) /
      (ov.getBoundingClientRect().width - LABEL - RIGHT), edge = 6 * px;
    if (Math.abs(t - view[0]) < edge) { odrag = {mode: "left"}; }
    else if (Math.abs(t - view[1]) < edge) { odrag = {mode: "right"}; }
    else if (t > view[0] && t < view[1]) { odrag = {mode: "move", t: t, v: view.slice()}; }
    else { odrag = {mode: "new", t: t}; }
    ov.setPointerCapture(ev.pointerId);
  });
  ov.addEventListener("pointermove", function (ev) {
    if (!odrag) { return; }
    var t = Math.min(Math.max(timeAt(ov, ev, full), full[0]), full[1]);
    if (odrag.mode === "move") {
      setView(odrag.v[0] + t - odrag.t, odrag.v[1] + t - odrag.t);
    } else if (odrag.mode === "left") {
      setView(Math.min(t, view[1] - 1e-3), view[1]);
    } else if (odrag.mode === "right") {
      setView(view[0], Math.max(t, view[0] + 1e-3));
    } else if (Math.abs(t - odrag.t) > 0) {
      setView(Math.min(t, odrag.t), Math.max(t, odrag.t));
    }
  });
  ov.addEventListener("pointerup", function () { odrag = null; });

  Array.prototype.forEach.call(document.querySelectorAll(".tl-tools button"), function (b) {
    b.addEventListener("click", function () {
      var v = b.getAttribute("data-view");
      if (v === "steps") { setView(T.view[0], T.view[1]); }
      else if (v === "all") { setView(full[0], full[1]); }
      else { zoom(v === "in" ? 0.5 : 2); }
    });
  });
  window.addEventListener("resize", draw);
  draw();
  document.documentElement.setAttribute("data-rendered", "1");
})();
