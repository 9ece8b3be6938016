// htmx binds the elements it swaps in only when they settle (htmx.config.defaultSettleDelay, 20 ms, later), but
// the browser can act on them before that: it focuses a swapped-in [autofocus] field at its next frame. A
// keystroke or click in that gap reached an unbound form, which then submitted natively and reloaded the whole
// page (the adjudication page's refused verdict, resubmitted with Ctrl+Enter, did so now and then). Binding the
// new content as soon as it is in the document closes the gap; htmx.process is idempotent, so the settle step
// binding it again changes nothing.
(function () {
  document.addEventListener("htmx:afterSwap", function (e) {
    var elt = e.target;
    if (window.htmx && elt && elt.isConnected) window.htmx.process(elt);
  });
})();
