// A visible character counter under every field with a long documented limit (maxlength >= 1000: notes and
// reasons 5,000, a study's description 5,000, a skeleton assertion 2,000): the browser stops typing at the limit
// silently, so say how much is used. It appears when the field is focused or already holds text (issue 31).
(function () {
  var LONG = 1000;

  function limitOf(el) {
    if (!el || !el.matches || !el.matches("textarea[maxlength], input[maxlength]")) return 0;
    var n = parseInt(el.getAttribute("maxlength"), 10);
    return n >= LONG ? n : 0;
  }

  function counterOf(el) {
    var next = el.nextElementSibling;
    if (next && next.classList.contains("char-count")) return next;
    var c = document.createElement("small");
    c.className = "char-count muted";
    if (el.id) c.id = el.id + "-count";
    el.insertAdjacentElement("afterend", c);
    return c;
  }

  function update(el) {
    var max = limitOf(el);
    if (!max) return;
    var c = counterOf(el), used = el.value.length;
    c.textContent = used.toLocaleString("en") + " / " + max.toLocaleString("en") + " characters";
    c.classList.toggle("full", used >= max);
  }

  document.addEventListener("focusin", function (e) { update(e.target); });
  document.addEventListener("input", function (e) { update(e.target); });
  function initial(root) {
    root.querySelectorAll("textarea[maxlength], input[maxlength]").forEach(function (el) { if (el.value) update(el); });
  }
  document.addEventListener("DOMContentLoaded", function () { initial(document); });
  document.addEventListener("htmx:afterSettle", function (e) { if (e.target && e.target.querySelectorAll) initial(e.target); });
})();
