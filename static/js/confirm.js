// Destructive buttons ask first. A submit button (or its form) with data-confirm="question" submits only when the
// person says yes; listened for in the capture phase, so a "no" stops htmx's submit handler too. Without
// JavaScript the form submits as before (the pages work without scripts).
(function () {
  document.addEventListener("submit", function (e) {
    var question = (e.submitter && e.submitter.getAttribute("data-confirm")) || e.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      e.preventDefault();
      e.stopImmediatePropagation();
    }
  }, true);
})();
