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
  document.addEventListener("htmx:afterSettle", function (e) { typeset(e.detail.elt || document); });
})();
