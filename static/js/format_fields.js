// The upload form shows the fields of the chosen format only: a field whose input names its formats
// (data-formats="lm-eval") is hidden for every other format. Without JavaScript every field shows.
(function () {
  function update(form) {
    var chosen = form.querySelector("select[name=format]");
    if (!chosen) return;
    form.querySelectorAll("[data-formats]").forEach(function (input) {
      var field = input.closest(".field") || input;
      var shown = input.getAttribute("data-formats").split(" ").indexOf(chosen.value) >= 0;
      field.hidden = !shown;
      input.disabled = !shown;  // a hidden field sends nothing
    });
  }
  function init(root) {
    root.querySelectorAll("form[data-format-fields]").forEach(function (form) {
      if (form.dataset.formatFieldsReady) return;
      form.dataset.formatFieldsReady = "1";
      form.addEventListener("change", function (event) {
        if (event.target.name === "format") update(form);
      });
      update(form);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:load", function (event) { init(event.target); });
})();
