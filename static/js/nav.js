// The grouped study navigation (templates/annotation/_study_nav.html) is made of <details> menus, which open
// with the mouse, Enter or Space without any script. This adds what a menu bar is expected to do: one menu
// open at a time, Escape closes the open one (focus back on its summary), a click or focus outside closes it.
(function () {
  function groups() { return document.querySelectorAll("details.navgroup"); }
  function closeAll(except) {
    groups().forEach(function (d) { if (d !== except) d.removeAttribute("open"); });
  }
  document.addEventListener("toggle", function (e) {
    var d = e.target;
    if (d.classList && d.classList.contains("navgroup") && d.open) closeAll(d);
  }, true);
  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape") return;
    var open = document.querySelector("details.navgroup[open]");
    if (!open) return;
    open.removeAttribute("open");
    open.querySelector("summary").focus();
  });
  function outside(e) {
    var open = document.querySelector("details.navgroup[open]");
    if (open && !open.contains(e.target)) open.removeAttribute("open");
  }
  document.addEventListener("click", outside);
  // An htmx request's error fragment (annotation/errors.py) lands in #htmx-error; its Dismiss button empties it.
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("[data-dismiss-error]");
    if (button) { var region = document.getElementById("htmx-error"); if (region) region.replaceChildren(); }
  });
  document.addEventListener("focusin", outside);
})();
