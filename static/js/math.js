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

  /* Reasoning models' thoughts write inline math as $...$ (R1: "$3(1+3(1+3))$"), where "$" is also money. The
   * rule pandoc uses tells them apart: an opening "$" is followed by a non-space, a closing one follows a
   * non-space and is not followed by a digit -- so "costs $3 and $4" stays text and "$x + 1$" is math. Each such
   * pair in the step's own text becomes \(...\), which the delimiters above typeset. */
  var INLINE_DOLLARS = /(^|[^$\\])\$(?=[^\s$])((?:[^$\\\n]|\\.)*?[^\s$\\])\$(?![\d$])/g;
  function inlineDollars(el) {
    if (el.textContent.indexOf("$") === -1) return;
    var walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT), node, nodes = [];
    while ((node = walker.nextNode())) nodes.push(node);
    nodes.forEach(function (n) {
      var text = n.nodeValue;
      var out = text.replace(INLINE_DOLLARS, function (_m, before, tex) { return before + "\\(" + tex + "\\)"; });
      if (out !== text) n.nodeValue = out;
    });
  }

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
      inlineDollars(el);
      if (el.textContent.indexOf("\\") === -1 && el.textContent.indexOf("$$") === -1) return;
      window.renderMathInElement(el, { delimiters: MODEL_DELIMITERS, throwOnError: false, trust: false });
      el.setAttribute("data-typeset", "");
    });
    reachable(root);
  }

  /* A display formula wider than its step scrolls sideways (.katex-display: overflow-x auto); a keyboard user
   * must be able to reach it to scroll it (WCAG 2.1.1; axe: scrollable-region-focusable), so such a formula
   * takes the focus -- only those that overflow, so a long thought gets no tab stop per formula. */
  function reachable(root) {
    root.querySelectorAll(".katex-display:not([tabindex])").forEach(function (el) {
      if (el.scrollWidth > el.clientWidth) {
        el.setAttribute("tabindex", "0");
        el.setAttribute("role", "group");
        el.setAttribute("aria-label", "formula (scrolls sideways)");
      }
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
