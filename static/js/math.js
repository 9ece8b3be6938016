/* Typesets math with KaTeX (served from our static files, never a CDN).
 * Authored text: the server marks math as span.math (display: span.math.display).
 * Model output (.step-text, .raw-text): only unambiguous delimiters, since a
 * lone "$" there is usually money. KaTeX runs with trust: false, so \href,
 * \includegraphics and friends are refused. */
(function () {
  "use strict";
  var MODEL_DELIMITERS = [
    { left: "$$", right: "$$", display: true },
    { left: "\\[", right: "\\]", display: true },
    { left: "\\(", right: "\\)", display: false }
  ];

  function typeset(root) {
    if (!window.katex) return;
    root.querySelectorAll("span.math:not([data-typeset])").forEach(function (el) {
      var tex = el.textContent;
      try {
        window.katex.render(tex, el, { displayMode: el.classList.contains("display"), throwOnError: false, trust: false });
        el.setAttribute("data-typeset", "");
        el.setAttribute("title", tex);
      } catch (e) { /* leave the TeX as text */ }
    });
    if (!window.renderMathInElement) return;
    root.querySelectorAll(".step-text:not([data-typeset])").forEach(function (el) {
      if (el.textContent.indexOf("\\") === -1 && el.textContent.indexOf("$$") === -1) return;
      window.renderMathInElement(el, { delimiters: MODEL_DELIMITERS, throwOnError: false, trust: false });
      el.setAttribute("data-typeset", "");
    });
  }

  window.raTypeset = typeset;
  document.addEventListener("DOMContentLoaded", function () { typeset(document); });
  // htmx settles each swapped element separately (a thought block is 100 of them): typeset the
  // ones that settled, once, after htmx's settle loop (a microtask) instead of once per event.
  var settled = [];
  document.addEventListener("htmx:afterSettle", function (e) {
    if (!settled.length) queueMicrotask(function () {
      var roots = settled;
      settled = [];
      roots.forEach(function (root) { if (root.isConnected) typeset(root); });
    });
    settled.push(e.detail.elt || document);
  });
})();
