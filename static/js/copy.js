// A "Copy" button beside a secret shown once (an API token, a one-time password): data-copy="#id" copies that
// element's text to the clipboard and says so on the button.
(function () {
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    navigator.clipboard.writeText(source.textContent.trim()).then(function () {
      button.textContent = "Copied";
    }, function () {
      button.textContent = "Copy failed: select the text";
    });
  });
})();
