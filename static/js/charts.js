// Draws every chart of a page: each <div data-chart="ID"> has its figure
// (plotly data + layout) in <script type="application/json" id="ID">, written
// by Django's json_script. No inline script, no CDN: plotly comes from our
// own static files. Runs on load and on every htmx swap.
(function () {
  "use strict";
  function draw(root) {
    if (typeof Plotly === "undefined") return;
    (root || document).querySelectorAll("[data-chart]").forEach(function (el) {
      if (el.dataset.drawn === "1") return;
      var source = document.getElementById(el.dataset.chart);
      if (!source) return;
      var fig = JSON.parse(source.textContent);
      if (!fig.data || fig.data.length === 0) {
        el.textContent = "No data for this chart.";
        el.classList.add("muted");
        el.dataset.drawn = "1";
        return;
      }
      Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
      el.dataset.drawn = "1";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:load", function (evt) { draw(evt.detail && evt.detail.elt); });
  // A chart drawn inside a closed <details> got a default width: fit it
  // when the section opens (toggle does not bubble, hence the capture).
  document.addEventListener("toggle", function (evt) {
    if (typeof Plotly === "undefined" || !evt.target.open) return;
    evt.target.querySelectorAll("[data-chart]").forEach(function (el) {
      if (el.dataset.drawn === "1" && el.classList.contains("js-plotly-plot")) Plotly.Plots.resize(el);
    });
  }, true);
})();
